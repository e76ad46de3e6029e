"""The library's catalogue (labsupport.po) and the translated notebooks' stored outputs."""

from __future__ import annotations

import gettext
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from i18n import catalog, checks, glossary, library, outputs  # noqa: E402
from i18n.__main__ import main as i18n_main  # noqa: E402
from labsupport.runtime.launch.errors import _wrap  # noqa: E402

MODULE = '''"""A module with messages."""
from labsupport.runtime.language import N_, _

HINT = N_("Send before you receive.")


def check(name, n):
    # translators: {name} is the learner's function, {n} a number of ranks
    return _("{name} is wrong on {n} ranks").format(name=name, n=n)


def speed(x):
    return _("{x:g} GB/s measured").format(x=x)
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A course repository with a library of three messages and no notebook catalogue."""
    (tmp_path / "notebooks" / "solutions").mkdir(parents=True)
    package = tmp_path / "labsupport" / "runtime"
    package.mkdir(parents=True)
    (package / "mod.py").write_text(MODULE)
    (tmp_path / "i18n" / "zh_CN").mkdir(parents=True)
    shutil.copy(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md", tmp_path / "i18n" / "zh_CN")
    return tmp_path


def _run(repo: Path, *args: str) -> int:
    return i18n_main([*args, "--root", str(repo)])


def _fill(repo: Path, table: dict[str, str]) -> int:
    path = repo / "zh.json"
    path.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    return _run(repo, "fill", "labsupport", str(path))


ZH = {
    "Send before you receive.": "先发送，再接收。",
    "{name} is wrong on {n} ranks": "{name} 在 {n} 个 rank 上出错",
    "{x:g} GB/s measured": "测得 {x:g} GB/s",
}


def _compiled(repo: Path) -> gettext.GNUTranslations:
    with (repo / library.compiled_path("zh_CN")).open("rb") as mo:
        return gettext.GNUTranslations(mo)


def test_messages_are_extracted_with_lines_and_translator_comments(repo):
    entries = {e.msgid: e for e in library.extract(repo)}
    assert list(entries) == list(ZH)
    assert entries["Send before you receive."].locations == ["labsupport/runtime/mod.py:4"]
    assert entries["{name} is wrong on {n} ranks"].locations == ["labsupport/runtime/mod.py:9"]
    assert "{name} is the learner's function" in entries["{name} is wrong on {n} ranks"].notes


def test_update_fill_compile_and_check(repo, capsys):
    assert _run(repo, "update") == 0
    po = repo / library.catalogue_path("zh_CN")
    assert po.exists() and (repo / library.compiled_path("zh_CN")).exists()
    problems = checks.check(repo, "zh_CN")
    assert any("3 message(s) of labsupport untranslated" in p for p in problems), problems
    assert _fill(repo, ZH) == 0
    assert checks.check(repo, "zh_CN") == []
    assert _compiled(repo).gettext("{x:g} GB/s measured") == "测得 {x:g} GB/s"
    assert "labsupport (the library)" in capsys.readouterr().out or True

    # The English changes: its entry turns fuzzy (keeping the old translation), the check fails.
    mod = repo / "labsupport" / "runtime" / "mod.py"
    mod.write_text(MODULE.replace("{name} is wrong on {n} ranks", "{name} is wrong on {n} rank(s)"))
    assert _run(repo, "update") == 0
    entry = catalog.Catalogue(po).entries["{name} is wrong on {n} rank(s)"]
    assert entry.fuzzy and entry.msgstr == "{name} 在 {n} 个 rank 上出错"
    assert any("fuzzy" in p for p in checks.check(repo, "zh_CN"))
    # A JSON entry of a msgid the catalogue lacks is reported; the others are filled.
    assert _fill(repo, {"{name} is wrong on {n} rank(s)": "{name} 在 {n} 个 rank 上出错",
                        "gone": "没了"}) == 1  # fmt: skip
    assert checks.check(repo, "zh_CN") == []


def test_a_stale_compiled_catalogue_fails(repo):
    assert _run(repo, "update") == 0
    assert _fill(repo, ZH) == 0
    (repo / library.compiled_path("zh_CN")).write_bytes(b"old")
    assert any("is stale" in p for p in checks.check(repo, "zh_CN"))


@pytest.mark.parametrize(
    ("msgid", "msgstr", "problem"),
    [
        ("{name} is wrong on {n} ranks", "{name} 在 {m} 个 rank 上出错", "placeholders differ"),
        ("{x:g} GB/s measured", "测得 {x} GB/s", "placeholders differ"),
        ("  at {where}", "位置：{where}", "leading spaces"),
        ("{name} hangs: a deadlock", "{name} 卡住：互相等待", "deadlock"),  # the glossary
    ],
)
def test_a_translation_must_keep_placeholders_indent_and_glossary(msgid, msgstr, problem):
    terms = glossary.load(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md")
    assert any(problem in p for p in library.entry_problems(msgid, msgstr, "", terms))


def test_a_placeholder_is_not_a_glossary_word():
    terms = glossary.load(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md")
    msgid = "  auto picks  {backend} on {device}, because:"
    assert (
        library.entry_problems(msgid, "  auto picks  {backend}（{device}），因为：", "", terms)
        == []
    )


def test_the_repositorys_library_catalogue_is_complete_and_compiled():
    terms = glossary.load(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md")
    assert library.problems(ROOT, "zh_CN", terms) == []


# ------------------------------------------------------------------- stored outputs


@pytest.fixture(scope="module")
def translate() -> outputs.Translator:
    return outputs.translator(ROOT, "zh_CN")


def _display(text: str) -> dict:
    from labsupport.runtime.check.messages import as_html

    return nbformat.v4.new_output(
        "display_data", data={"text/plain": text, "text/html": as_html(text)}
    )


def test_a_stored_grader_message_comes_out_chinese(translate):
    from labsupport.runtime.check.messages import as_html

    english = "FAIL Exercise 01.1: wrong on rank 1, 3 of 4.\n  rank 1: expected 6, got 7\n" \
        "  rank 3: the ranks hold tensor([1., 2.]), you said [1, 3]"  # fmt: skip
    done = translate.output(_display(english))
    chinese = (
        "FAIL 练习 01.1：4 个 rank 中，rank 1, 3 的结果不对。\n  rank 1：期望 6，得到 7\n"
        "  rank 3：各 rank 上实际是 tensor([1., 2.])，你预测的是 [1, 3]"
    )
    assert done["data"]["text/plain"] == chinese
    assert done["data"]["text/html"] == as_html(chinese)  # the badge still reads FAIL
    assert '">\u2717 FAIL</span>' in done["data"]["text/html"]
    passed = translate.output(_display("PASS Your function: right on all 5 cases."))
    assert passed["data"]["text/plain"] == "PASS 你的函数：全部 5 个用例都正确。"


def test_a_learners_print_that_looks_like_a_grader_line_is_left_alone(translate):
    text = "FAIL Exercise 01.1: wrong on rank 1 of 4.\n  rank 1: expected 6, got 7\n"
    printed = nbformat.v4.new_output("stream", name="stdout", text=text)
    assert translate.output(printed) == printed
    # ... and a display that is not the grader's (no labsupport-check HTML) too
    shown = nbformat.v4.new_output("display_data", data={"text/plain": text})
    assert translate.output(shown) == shown
    # ... and a line of a grader's message that only resembles a message stays English
    odd = translate.output(_display("FAIL my own words: nothing like the catalogue"))
    assert odd["data"]["text/plain"] == "FAIL my own words: nothing like the catalogue"


def test_the_launchers_error_and_doctors_report_come_out_chinese(translate):
    evalue = (
        "ranks 0, 1 did not finish within 3 s: each rank's stack shows where it\n"
        "is blocked (a rank waiting for a peer that never sends is a deadlock).\n\n"
        "--- ranks 0, 1 stack (the same on each) ---\nStack (most recent call last):\n"
        '  File "<%%ranks cell 6>", line 3, in <module>\n    dist.recv(x, src=1)\n\n'
        "(the ranks were restarted: names defined in earlier cells are gone)"
    )
    error = nbformat.v4.new_output(
        "error", ename="CollectiveTimeout", evalue=evalue,
        traceback=[f"\x1b[31mCollectiveTimeout\x1b[39m: {evalue}\n"],
    )  # fmt: skip
    done = translate.output(error)
    assert done["evalue"].startswith(
        "rank 0, 1 没有在 3 秒内完成：每个 rank 的调用栈显示它阻塞在哪里\n"
        "（一个 rank 在等一个永远不会发送的对端，这就是死锁）。\n\n"
        "--- rank 0, 1 的调用栈（每个都相同）---\nStack (most recent call last):\n"
    )
    assert done["evalue"].endswith("(各 rank 已重启：之前的单元格里定义的名字都没有了)")
    assert "dist.recv(x, src=1)" in done["evalue"]  # the stack itself stays as it was
    assert done["traceback"] == [f"\x1b[31mCollectiveTimeout\x1b[39m: {done['evalue']}\n"]
    wrapped = (
        "rank 2 raised RuntimeError: Detected mismatch between collectives on ranks: Tensor "
        "shapes: 3 vs 2\n(ranks 0, 1, 3 also raised RuntimeError, e.g. rank 0: Detected mismatch "
        "between collectives on\n  ranks: Tensor shapes: 2 vs 3)"
    )
    rank_error = nbformat.v4.new_output("error", ename="RankError", evalue=wrapped, traceback=[])
    # A wrapped line is matched whole, and wrapped again as the launcher wraps it in Chinese.
    also = (
        "（rank 0, 1, 3 也抛出了 RuntimeError，例如 rank 0：Detected mismatch between "
        "collectives on ranks: Tensor shapes: 2 vs 3）"
    )
    assert translate.output(rank_error)["evalue"] == (
        "rank 2 抛出了 RuntimeError：Detected mismatch between collectives on ranks: Tensor "
        f"shapes: 3 vs 2\n{_wrap(also)}"
    )
    assert "\n" in _wrap(also)
    report = (
        "labsupport doctor\n  labsupport  0.2.0 (CHANGELOG.md says what changed)\n"
        "  gloo        available\n  auto picks  gloo on cpu, because:\n"
        "              - gloo can run 4 rank(s)\n"
    )
    doctor = nbformat.v4.new_output("stream", name="stdout", text=report)
    assert translate.output(doctor)["text"] == (
        "labsupport doctor\n  labsupport  0.2.0（改动见 CHANGELOG.md）\n  gloo        可用\n"
        "  auto picks  gloo（cpu），因为：\n              - gloo 能运行 4 个 rank\n"
    )


def test_the_zh_solutions_show_the_librarys_lines_in_chinese_and_the_rest_as_stored():
    english = nbformat.read(ROOT / "notebooks/solutions/01_primitives.ipynb", as_version=4)
    zh_path = ROOT / "notebooks/zh_CN/solutions/01_primitives.ipynb"
    if not zh_path.exists():
        pytest.skip("notebook 01 has no zh copy in this checkout")
    zh = nbformat.read(zh_path, as_version=4)
    first = next(c for c in zh.cells if c.cell_type == "code")
    assert first.id == outputs.CELL_ID and 'lab.set_language("zh_CN")' in first.source
    assert "traceback" in first.source  # it says what stays English
    assert zh.metadata["labsupport"]["language"] == "zh_CN"
    plain = [
        "".join(o["data"]["text/plain"])
        for c in zh.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "display_data" and "text/plain" in o.get("data", {})
    ]
    assert "PASS 练习 01.1：全部 4 个 rank 上都正确。" in plain
    en_code = [c for c in english.cells if c.cell_type == "code"]
    zh_code = [c for c in zh.cells if c.cell_type == "code" and c.id != outputs.CELL_ID]
    assert [c.source for c in en_code] == [c.source for c in zh_code]
