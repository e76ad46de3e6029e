"""The zh-CN edition's machinery (i18n/): blocks, catalogues, generated copies, checks."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from i18n import blocks, catalog, checks, documents, glossary  # noqa: E402
from i18n.__main__ import main as i18n_main  # noqa: E402


def _markdown_texts() -> list[tuple[str, str]]:
    found = []
    paths = [*(ROOT / "notebooks" / "solutions").glob("*.ipynb"), *ROOT.glob("notebooks/*.ipynb")]
    paths += [*(ROOT / "slides").glob("[0-9][0-9]_*.ipynb")]
    for path in sorted(paths):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "markdown":
                found.append((f"{path.relative_to(ROOT)}:{index}", cell.source))
    for name in ("README.md", "slides/INSTRUCTOR.md", "REFERENCES.md"):
        found.append((name, (ROOT / name).read_text(encoding="utf-8")))
    return found


def test_every_markdown_cell_and_guide_of_the_repository_splits_and_joins_byte_for_byte():
    texts = _markdown_texts()
    assert len(texts) > 300
    broken = [where for where, text in texts if blocks.join(blocks.split(text)) != text]
    assert not broken, broken
    # and each block really is a block: a translation replaces all of its text
    for where, text in texts:
        marked = blocks.join(blocks.split(text), lambda b: "\0")
        leftover = [s for s in blocks.split(text) if isinstance(s, str) and blocks.has_words(s)]
        assert "\0" in marked or not blocks.blocks(text), where
        assert all(s.lstrip().startswith(("```", "<!--", "    ", "---")) for s in leftover), (
            where,
            leftover,
        )


TRICKY = """# Title #

Intro paragraph
over two lines.

- item one
  continued
- item two

  second paragraph of item two
1. lazy
continuation line

> **Common mistake.** A quote
>
> with two paragraphs.

<details><summary>Answer</summary>

- a list inside the answer

```python
code = 1
```
</details>

<!-- BEGIN SOLUTION -->

$$ \\frac{2(p-1)}{p} $$

| name | meaning |
|---|---|
| 1 | 2 |

```bash
make lab   # a comment
```
Last line, no newline"""


def test_tricky_markdown_round_trips_and_splits_where_a_translator_expects():
    segments = blocks.split(TRICKY)
    assert blocks.join(segments) == TRICKY
    for text in (TRICKY + "\n", TRICKY.replace("\n", "\r\n"), "", "\n\n", "para"):
        assert blocks.join(blocks.split(text)) == text
    found = {(b.kind, b.msgid) for b in blocks.blocks(TRICKY)}
    assert ("heading", "Title #") in found  # the marks stay out of the text
    assert ("list item", "item one continued") in found  # marker and indent too, lines joined
    assert ("list item", "item two\n\nsecond paragraph of item two") in found
    assert ("list item", "1. lazy continuation line") in found  # lazy: markers kept
    assert ("blockquote", "**Common mistake.** A quote\n\nwith two paragraphs.") in found
    details = [b for b in blocks.blocks(TRICKY) if b.kind == "details"]
    assert len(details) == 1 and details[0].msgid.endswith("</details>")
    assert "code = 1" in details[0].msgid  # the whole answer is one entry
    texts = [b.msgid for b in blocks.blocks(TRICKY)]
    assert not any("BEGIN SOLUTION" in t or "\\frac" in t or "make lab" in t for t in texts)
    assert any(t.startswith("| name | meaning |") for t in texts)  # a whole table
    assert "Last line, no newline" in texts
    assert "Intro paragraph over two lines." in texts  # the English's wrap is not the msgid
    # the English as written where nothing translates a block
    assert blocks.join(segments, lambda b: None) == TRICKY


@pytest.mark.parametrize(
    ("english", "msgid"),
    [
        ("A paragraph\nover three\n  lines.", "A paragraph over three lines."),
        (
            "an item\ncontinued\n- a sub-item\n  continued",
            "an item continued\n- a sub-item continued",
        ),
        ("one\n\ntwo\nparagraphs", "one\n\ntwo paragraphs"),
        ("a hard  \nbreak and\na soft one", "a hard  \nbreak and a soft one"),
        ("a hard\\\nbreak", "a hard\\\nbreak"),
        ("a `code\nspan` wrapped", "a `code span` wrapped"),
        ("> a quote\n> on two lines", "> a quote on two lines"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("text\n\n```python\nx = 1\ny = 2\n```", "text\n\n```python\nx = 1\ny = 2\n```"),
        ("text\n\n    indented\n    code", "text\n\n    indented\n    code"),
        ("- one\n- two\n- three", "- one\n- two\n- three"),
        (
            "<details><summary>Answer</summary>\n\nThe answer,\nwrapped.\n\n</details>",
            "<details><summary>Answer</summary>\n\nThe answer, wrapped.\n\n</details>",
        ),
        (
            '<p align="center">\n<img src="x.png">\n</p>',
            '<p align="center">\n<img src="x.png">\n</p>',
        ),
    ],
)
def test_a_msgid_is_its_block_without_the_englishs_hard_wraps(english, msgid):
    assert blocks.unwrap(english) == msgid
    assert blocks.unwrap(msgid) == msgid  # idempotent: the migration can run twice
    # the same page, whitespace aside
    assert blocks._rendered(english) == blocks._rendered(msgid)


def test_a_block_keeps_its_line_for_the_catalogues_location():
    found = blocks.blocks(TRICKY)
    lines = TRICKY.split("\n")
    for block in found:
        assert lines[block.line].strip().endswith(block.english.split("\n")[0].strip()), block
    assert [b.line for b in found][:3] == [0, 2, 5]


def test_a_translation_goes_back_into_the_blocks_frame():
    text = "## 1. Check\n\n- one\n  two\n\n> quoted\n> text\n"
    out = blocks.join(
        blocks.split(text), lambda b: {"1. Check": "1. 检查"}.get(b.msgid, "译文\n续")
    )
    assert out == "## 1. 检查\n\n- 译文\n  续\n\n> 译文\n> 续\n"


@pytest.mark.parametrize(
    ("english", "chinese", "problem"),
    [
        ("run `lab.doctor()` now", "现在运行", "lacks the code `lab.doctor()`"),
        ("rank 9 of 16", "第 9 个", "lacks the number 16"),
        ("see [refs](../R.md)", "见[参考](../X.md)", "lacks the link target ../R.md"),
        ("$t = \\alpha$ here", "这里", "lacks the math"),
        ("<details><summary>Answer</summary>", "答案", "lacks the HTML tag"),
        ("A long\nline.", "很长的\n一行。", "shows as a space"),
        ("**Predict.** What?", "**先预测。**什么？", "does not render as in the English"),
    ],
)
def test_a_translation_must_keep_code_numbers_links_math_html_and_emphasis(
    english, chinese, problem
):
    found = checks.kept_problems(english, chinese)
    assert any(problem in p for p in found), found


@pytest.mark.parametrize(
    ("english", "chinese", "problem"),
    [
        ("It is *not* a ring.", "它*不是* ring。", "Chinese emphasis is bold"),
        ("It is **not** a ring.", "它*不是* ring。", "does not render as in the English"),
        ("It is *not* a ring.", "它不是 ring。", "does not render as in the English"),
    ],
)
def test_chinese_emphasis_is_bold_and_as_many_spans_as_the_english(english, chinese, problem):
    found = checks.kept_problems(english, chinese)
    assert any(problem in p for p in found), found


def test_an_english_italic_may_be_bold_in_chinese():
    assert checks.kept_problems("It is *not* a ring.", "它**不是** ring。") == []


def test_a_faithful_translation_passes_the_kept_checks():
    english = "**Predict.** With 4 ranks, `x` is [0,1]: see [refs](../R.md) and $n/p$."
    chinese = "**先预测。** 4 个 rank 时 `x` 是 [0,1]：见[参考](../R.md)和 $n/p$。"
    assert checks.kept_problems(english, chinese) == []


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("Open the notebooks in `notebooks/`.", "打开 `notebooks/zh_CN/` 中的笔记本。"),
        (
            "See `notebooks/solutions/03_ring.ipynb`.",
            "见 `notebooks/zh_CN/solutions/03_ring.ipynb`。",
        ),
        (
            "Decks: `make lab LAB_DIR=slides`.",
            "幻灯片：`make lab LAB_DIR=slides COURSE_LANG=zh_CN`。",
        ),
        ("HTML in `slides/_build/`.", "HTML 在 `slides/_build/zh_CN/`。"),
        ("The guide, `slides/INSTRUCTOR.md`.", "讲师指南 `slides/INSTRUCTOR.zh-CN.md`。"),
        ("Read `README.md`.", "读 `README.md`（中文版 `README.zh-CN.md`）。"),
        ("Open `notebooks/`.", "打开 `notebooks/`。"),  # the English span itself is fine
    ],
)
def test_a_code_span_may_point_at_the_chinese_copy_under_the_path_map(english, chinese):
    assert checks.kept_problems(english, chinese) == []


@pytest.mark.parametrize(
    ("english", "chinese", "problem"),
    [
        # a path outside the map: not the zh copy of anything
        ("Open `notebooks/`.", "打开 `notebooks/fr/`。", "lacks the code `notebooks/`"),
        ("Open `notebooks/`.", "打开 `notebooks/fr/`。", "has the code `notebooks/fr/`"),
        # READMEs without a zh copy are not mapped
        ("See `i18n/README.md`.", "见 `i18n/README.zh-CN.md`。", "lacks the code `i18n/README.md`"),
        # a span the English does not have, mapped or not
        ("Run `make test`.", "运行 `make test` 和 `rm -rf .venv`。", "has the code `rm -rf .venv`"),
        ("Run `make lab`.", "运行 `make lab COURSE_LANG=fr`。", "lacks the code `make lab`"),
    ],
)
def test_a_code_span_outside_the_path_map_fails(english, chinese, problem):
    found = checks.kept_problems(english, chinese)
    assert any(problem in p for p in found), found


def test_the_path_maps_images_are_the_copies_the_repository_has():
    for english, chinese in checks.PATH_MAP.items():
        if english == "slides/_build/":  # not committed: `make slides` writes it
            assert "slides/_build/zh_CN/" in (ROOT / "slides" / "build.py").read_text()
        elif english.endswith("/"):
            assert (ROOT / english).is_dir() and (ROOT / chinese).is_dir(), english
        else:
            assert any((ROOT / d / chinese).is_file() for d in ("", "slides")), chinese
    assert (ROOT / "notebooks" / "zh_CN" / "solutions").is_dir()
    assert (ROOT / "slides" / "zh_CN").is_dir()


def test_the_glossary_flags_a_term_translated_another_way_unless_a_comment_says_why():
    terms = glossary.load(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md")
    assert len(terms) > 30
    english = "Each communicator has a latency."
    assert glossary.term_problems(terms, english, "每个通信域都有时延。") == []
    found = glossary.term_problems(terms, english, "每个通信器都有延迟。")
    assert len(found) == 2 and "通信域" in found[0] and "时延" in found[1]
    waived = "glossary: latency (the human kind)\nglossary: communicator (ditto)"
    assert glossary.term_problems(terms, english, "每个通信器都有延迟。", waived) == []
    # a term only inside code does not count
    assert glossary.term_problems(terms, "call `latency()`", "调用 `latency()`") == []


def test_wording_taken_from_the_reference_article_is_found():
    article = "前言\n多机训练的瓶颈通常不在算力而在网络通信这是一段很长的原文句子。"
    runs = glossary.shingles(article)
    assert glossary.borrowed("瓶颈通常不在算力而在网络通信这是一段", runs)
    assert glossary.borrowed("通信往往是多机训练中真正的瓶颈。", runs) is None


def test_relink_points_at_the_translated_copy_where_there_is_one():
    targets = {Path("notebooks/solutions/01_a.ipynb"): Path("notebooks/zh_CN/solutions/01_a.ipynb")}
    text = (
        "[next](01_a.ipynb), [other](02_b.ipynb), [refs](../../REFERENCES.md#x), "
        "[web](https://x.org), [here](#top), <a href='02_b.ipynb'>b</a>"
    )
    english = Path("notebooks/solutions/00_w.ipynb")
    out = documents.relink(text, english, Path("notebooks/zh_CN/solutions/00_w.ipynb"), targets)
    assert out == (
        "[next](01_a.ipynb), [other](../../solutions/02_b.ipynb), "
        "[refs](../../../REFERENCES.md#x), [web](https://x.org), [here](#top), "
        "<a href='../../solutions/02_b.ipynb'>b</a>"
    )


def test_the_preface_lists_every_translated_document_and_names_the_rest():
    listed = documents.translated_files(ROOT, "zh_CN", Path("README.zh-CN.md"))
    missing: dict[str, list[str]] = {"notebook": [], "deck": [], "markdown": []}
    for doc in documents.documents(ROOT):
        copy = doc.outputs("zh_CN")[0].as_posix()
        if (ROOT / doc.catalogue("zh_CN")).exists():
            assert f"]({copy})" in listed, (doc.domain, listed)
        else:
            assert f"]({copy})" not in listed, (doc.domain, listed)
            missing[doc.kind].append(doc.source.stem[:2])
    closing = listed.partition("尚未翻译")[2]
    assert bool(closing) == any(missing.values()), listed
    for kind, word in (("notebook", "笔记本"), ("deck", "幻灯片")):
        if missing[kind]:
            assert f"{word} {documents._numbers(missing[kind])}" in closing, closing
    assert documents._numbers(["01", "02", "03", "05", "07", "08"]) == "01–03、05、07–08"


# ------------------------------------------------------------- a small repository


def _notebook(path: Path, cells: list) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index}"
    nb.metadata["kernelspec"] = {
        "name": "collective-course",
        "display_name": "x",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A course repository with one notebook (an exercise, a written answer, outputs)."""
    solution = tmp_path / "notebooks" / "solutions" / "00_w.ipynb"
    code = nbformat.v4.new_code_cell("print(1)")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    _notebook(
        solution,
        [
            nbformat.v4.new_markdown_cell("# 00 · Welcome\n\nEvery rank runs the cell."),
            code,
            nbformat.v4.new_markdown_cell(
                "**Your answer:** <!-- BEGIN SOLUTION -->Four.<!-- END SOLUTION -->\n\n"
                "See [refs](../../REFERENCES.md)."
            ),
        ],
    )
    (tmp_path / "REFERENCES.md").write_text("# References\n")
    glossary_dir = tmp_path / "i18n" / "zh_CN"
    glossary_dir.mkdir(parents=True)
    shutil.copy(ROOT / "i18n" / "zh_CN" / "GLOSSARY.md", glossary_dir)
    return tmp_path


ZH = {
    "00 · Welcome": "00 · 欢迎",
    "Every rank runs the cell.": "每个 rank 都运行这个单元格。",
    "**Your answer:** <!-- BEGIN SOLUTION -->Four.<!-- END SOLUTION -->": (
        "**你的答案：** <!-- BEGIN SOLUTION -->四个。<!-- END SOLUTION -->"
    ),
    "See [refs](../../REFERENCES.md).": "见[参考文献](../../REFERENCES.md)。",
    "*Your answer here.*": "**在这里写下你的答案。**",
}


def _translate(po: Path, table: dict[str, str]) -> None:
    from translate.storage import po as pofile

    store = pofile.pofile.parsefile(str(po))
    for unit in store.units:
        if unit.source in table:
            unit.target = table[unit.source]
            unit.markfuzzy(False)
    with po.open("wb") as out:
        store.serialize(out)


def _run(repo: Path, *args: str) -> int:
    return i18n_main([*args, "--root", str(repo)])


def test_nothing_is_generated_without_a_catalogue(repo):
    assert _run(repo, "update") == 0
    assert not (repo / "notebooks" / "zh_CN").exists()
    assert checks.check(repo, "zh_CN") == []


def test_a_translated_notebook_is_generated_checked_and_kept_in_step(repo, capsys):
    assert _run(repo, "init", "00_w") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po"
    problems = checks.check(repo, "zh_CN")
    assert any("untranslated" in p for p in problems), problems
    _translate(po, ZH)
    assert _run(repo, "update") == 0
    assert checks.check(repo, "zh_CN") == []
    solution = nbformat.read(repo / "notebooks/zh_CN/solutions/00_w.ipynb", as_version=4)
    learner = nbformat.read(repo / "notebooks/zh_CN/00_w.ipynb", as_version=4)
    english = nbformat.read(repo / "notebooks/solutions/00_w.ipynb", as_version=4)
    assert solution.cells[0].source == "# 00 · 欢迎\n\n每个 rank 都运行这个单元格。"
    assert [c.id for c in solution.cells] == [c.id for c in english.cells]
    assert solution.cells[1] == english.cells[1]  # code and outputs, as they are
    assert learner.cells[1].outputs == [] and learner.cells[1].source == "print(1)"
    assert "四个" in solution.cells[2].source and "四个" not in learner.cells[2].source
    assert "**在这里写下你的答案。**" in learner.cells[2].source
    assert "(../../../REFERENCES.md)" in solution.cells[2].source
    assert "(../../REFERENCES.md)" in learner.cells[2].source
    assert "100.0 %" in capsys.readouterr().out
    assert _run(repo, "update") == 0  # a second run changes nothing
    assert not [
        ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("wrote", "updated"))
    ]

    # The English changes: that block turns fuzzy, keeping its old translation.
    english.cells[0].source = "# 00 · Welcome\n\nEvery rank runs this cell."
    nbformat.write(english, repo / "notebooks/solutions/00_w.ipynb")
    assert any("stale" in p for p in checks.check(repo, "zh_CN"))
    assert _run(repo, "update") == 0
    entry = catalog.Catalogue(po).entries["Every rank runs this cell."]
    assert entry.fuzzy and entry.msgstr == "每个 rank 都运行这个单元格。"
    assert catalog.Catalogue(po).entries["00 · Welcome"].done  # the others are untouched
    problems = checks.check(repo, "zh_CN")
    assert (
        len(problems) == 1 and "1 block(s) of notebooks/solutions/00_w.ipynb fuzzy" in problems[0]
    )
    _translate(po, {"Every rank runs this cell.": "每个 rank 都运行此单元格。"})
    assert _run(repo, "update") == 0
    assert checks.check(repo, "zh_CN") == []


def test_a_hand_edited_copy_or_a_changed_code_cell_fails_the_check(repo):
    assert _run(repo, "init", "00_w") == 0
    _translate(repo / "i18n/zh_CN/LC_MESSAGES/00_w.po", ZH)
    assert _run(repo, "update") == 0
    copy = repo / "notebooks/zh_CN/solutions/00_w.ipynb"
    nb = nbformat.read(copy, as_version=4)
    nb.cells[1].source = "print(2)"
    nbformat.write(nb, copy)
    problems = checks.check(repo, "zh_CN")
    assert any("stale or was edited by hand" in p for p in problems), problems
    assert any("code cell 1 differs from the English" in p for p in problems), problems


def test_a_copy_whose_catalogue_is_gone_is_reported_then_removed(repo):
    assert _run(repo, "init", "00_w") == 0
    _translate(repo / "i18n/zh_CN/LC_MESSAGES/00_w.po", ZH)
    assert _run(repo, "update") == 0
    (repo / "i18n/zh_CN/LC_MESSAGES/00_w.po").unlink()
    assert any("has no catalogue" in p for p in checks.check(repo, "zh_CN"))
    assert _run(repo, "update") == 0
    assert not (repo / "notebooks/zh_CN/00_w.ipynb").exists()


def test_a_broken_link_in_a_copy_is_reported(repo):
    assert _run(repo, "init", "00_w") == 0
    table = dict(ZH)
    (repo / "REFERENCES.md").unlink()
    _translate(repo / "i18n/zh_CN/LC_MESSAGES/00_w.po", table)
    assert _run(repo, "update") == 0
    problems = checks.check(repo, "zh_CN")
    assert any("leads to no file" in p and "REFERENCES.md" in p for p in problems), problems


def test_a_glossary_term_translated_another_way_fails_the_check(repo):
    assert _run(repo, "init", "00_w") == 0
    table = dict(ZH, **{"Every rank runs the cell.": "每个进程都运行这个单元格。"})
    _translate(repo / "i18n/zh_CN/LC_MESSAGES/00_w.po", table)
    assert _run(repo, "update") == 0
    problems = checks.check(repo, "zh_CN")
    assert len(problems) == 1 and "uses 'rank'" in problems[0], problems


def _with_grader(repo: Path, chinese: str) -> None:
    """The small repository, its sentence about a grader translated as ``chinese``."""
    solution = repo / "notebooks" / "solutions" / "00_w.ipynb"
    nb = nbformat.read(solution, as_version=4)
    nb.cells[0].source = "# 00 · Welcome\n\nEvery rank runs the cell, and a grader checks it."
    nbformat.write(nb, solution)
    assert _run(repo, "init", "00_w") == 0
    table = dict(ZH, **{"Every rank runs the cell, and a grader checks it.": chinese})
    _translate(repo / "i18n/zh_CN/LC_MESSAGES/00_w.po", table)
    assert _run(repo, "update") == 0


def _grader_pending(repo: Path) -> None:
    """The small repository's glossary with 'grader' back in the warn-only table.

    The real glossary checks every term it has decided (issue 37); this table is how a
    newly decided term starts, so the test builds one.
    """
    path = repo / "i18n/zh_CN/GLOSSARY.md"
    text = path.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| grader |"))
    text = text.replace(row + "\n", "", 1)
    end = text.index("\n## ", glossary.PENDING_HEADING.search(text).end())
    table = "\n| English | 中文 | 出处 · source |\n|---|---|---|\n" + row + "\n"
    path.write_text(text[:end] + table + text[end:], encoding="utf-8")


def test_a_term_of_the_warn_only_table_warns_without_failing(repo, capsys):
    _grader_pending(repo)
    pending = glossary.load(repo / "i18n/zh_CN/GLOSSARY.md", glossary.PENDING_HEADING)
    checked = glossary.load(repo / "i18n/zh_CN/GLOSSARY.md")
    assert "grader" in {t.english[0] for t in pending} - {t.english[0] for t in checked}
    _with_grader(repo, "每个 rank 都运行这个单元格，再由评分程序检查。")
    assert checks.check(repo, "zh_CN") == []
    warnings = checks.term_warnings(repo, "zh_CN")
    assert len(warnings) == 1 and "uses 'grader'" in warnings[0] and "评分器" in warnings[0]
    capsys.readouterr()
    assert _run(repo, "check") == 0
    assert "warning: " in capsys.readouterr().err


def test_a_term_that_follows_the_warn_only_table_is_quiet(repo):
    _grader_pending(repo)
    _with_grader(repo, "每个 rank 都运行这个单元格，再由评分器检查。")
    assert checks.check(repo, "zh_CN") == [] and checks.term_warnings(repo, "zh_CN") == []


def test_the_decided_terms_are_in_the_glossary():
    """issue 37: HCCL's own words and one word per idea, checked or warned about."""
    path = ROOT / "i18n" / "zh_CN" / "GLOSSARY.md"
    terms = {t.english[0]: t.chinese for t in glossary.load(path)}
    terms.update({t.english[0]: t.chinese for t in glossary.load(path, glossary.PENDING_HEADING)})
    for english, chinese in [
        ("link", "链路"),
        ("link set-up", "建链"),
        ("pairwise", "逐对通信"),
        ("cost model", "代价模型"),
        ("partner", "对端"),
        ("PCIe switch", "PCIe Switch"),
        ("grader", "评分器"),
        ("wiring", "组网"),
        ("NIC", "网卡"),
        ("hop", "跳"),
        ("flat ring", "扁平 Ring"),
        ("simulator", "仿真"),
        ("emulated network", "模拟网络"),
    ]:
        assert chinese in terms[english], (english, terms.get(english))
    assert "链接" not in terms["link"]
    text = path.read_text(encoding="utf-8")
    assert "8 卡服务器" in text and "耗时" in text and "一打多" in text


def test_unknown_documents_are_refused_with_the_known_names(repo, capsys):
    assert _run(repo, "init", "99_nope") == 1
    assert "known: 00_w" in capsys.readouterr().err


# ---------------------------------------------------------------- make lab COURSE_LANG


def _make_n(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "lab", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_course_lang_opens_jupyterlab_in_chinese_for_this_run_only():
    chinese = _make_n("COURSE_LANG=zh_CN")
    assert chinese.returncode == 0, chinese.stderr
    assert f"JUPYTER_CONFIG_PATH={ROOT / 'jupyter' / 'lang' / 'zh_CN'}" in chinese.stdout
    assert "--LabApp.default_url=/lab/tree/notebooks/zh_CN" in chinese.stdout
    assert "jupyterlab-language-pack" not in chinese.stdout  # through the zh-cn extra
    assert "'.[lab,zh-cn]'" in chinese.stdout or "stamp-lang-zh_CN" not in chinese.stdout
    plain = _make_n()
    assert "JUPYTER_CONFIG_PATH" not in plain.stdout and "zh_CN" not in plain.stdout
    import json

    overrides = ROOT / "jupyter/lang/zh_CN/labconfig/default_setting_overrides.json"
    assert json.loads(overrides.read_text()) == {
        "@jupyterlab/translation-extension:plugin": {"locale": "zh_CN"}
    }


def test_an_unknown_course_lang_is_refused_before_anything_runs():
    result = _make_n("COURSE_LANG=fr")
    assert result.returncode != 0
    assert "COURSE_LANG=fr is not a language of the course" in result.stderr


# --------------------------------------------------- catalogues a translator can keep


def _rewrite_cell(repo: Path, index: int, source: str) -> None:
    path = repo / "notebooks" / "solutions" / "00_w.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[index].source = source
    nbformat.write(nb, path)


WRAPPED = "# 00 · Welcome\n\nEvery rank runs the cell on its own\nprocess, four of them."
ZH_WRAPPED = dict(
    ZH,
    **{
        "Every rank runs the cell on its own process, four of them.": (
            "每个 rank 都在自己的进程上运行这个单元格，共四个。"
        )
    },
)


def test_rewrapping_an_english_paragraph_keeps_its_translation_current(repo, capsys):
    _rewrite_cell(repo, 0, WRAPPED)
    assert _run(repo, "init", "00_w") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po"
    _translate(po, ZH_WRAPPED)
    assert _run(repo, "update") == 0
    assert checks.check(repo, "zh_CN") == []
    copy = repo / "notebooks/zh_CN/solutions/00_w.ipynb"
    before = copy.read_text()

    # Fewer words per line, then more: the same entry, translated, not fuzzy.
    for rewrapped in (
        "# 00 · Welcome\n\nEvery rank\nruns the cell\non its own\nprocess,\nfour of them.",
        "# 00 · Welcome\n\nEvery rank runs the cell on its own process, four of them.",
    ):
        _rewrite_cell(repo, 0, rewrapped)
        capsys.readouterr()
        assert _run(repo, "update") == 0
        assert "updated" not in capsys.readouterr().out  # the catalogue is untouched
        entry = catalog.Catalogue(po).entries[
            "Every rank runs the cell on its own process, four of them."
        ]
        assert entry.done and not entry.fuzzy
        assert checks.check(repo, "zh_CN") == []
        assert copy.read_text() == before  # the translated copy does not change either

    # A changed word does make it fuzzy, its old translation kept for the translator.
    _rewrite_cell(
        repo, 0, "# 00 · Welcome\n\nEvery rank runs the cell on its own\nprocess, five of them."
    )
    assert _run(repo, "update") == 0
    entry = catalog.Catalogue(po).entries[
        "Every rank runs the cell on its own process, five of them."
    ]
    assert (
        entry.fuzzy
        and entry.msgstr == ZH_WRAPPED["Every rank runs the cell on its own process, four of them."]
    )
    assert any("fuzzy" in p for p in checks.check(repo, "zh_CN"))
    # ... and an untranslated block's English shows as written, lines and all.
    zh = nbformat.read(copy, as_version=4)
    assert (
        zh.cells[0].source
        == "# 00 · 欢迎\n\nEvery rank runs the cell on its own\nprocess, five of them."
    )


def test_a_guides_entries_say_the_line_their_block_starts_on(repo):
    (repo / "README.md").write_text(
        "# Course\n\nSee [the translation](README.zh-CN.md), a paragraph\nover two lines.\n\n"
        "- an item\n- another\n",
        encoding="utf-8",
    )
    assert _run(repo, "init", "README") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "README.po"
    entries = catalog.Catalogue(po).entries
    assert entries["Course"].locations == ["README.md:1"]
    assert entries[
        "See [the translation](README.zh-CN.md), a paragraph over two lines."
    ].locations == ["README.md:3"]
    assert entries["an item"].locations == ["README.md:6"]
    assert entries["another"].locations == ["README.md:7"]
    # a notebook's entries name the cell, counted from 1 (code cells too)
    assert _run(repo, "init", "00_w") == 0
    cells = catalog.Catalogue(repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po").entries
    assert cells["Every rank runs the cell."].locations == ["notebooks/solutions/00_w.ipynb:1"]
    assert cells["See [refs](../../REFERENCES.md)."].locations == [
        "notebooks/solutions/00_w.ipynb:3"
    ]


def _header(po: Path) -> dict[str, str]:
    from translate.storage import po as pofile

    return pofile.pofile.parsefile(str(po)).parseheader()


def test_a_catalogue_has_its_header_filled_and_no_obsolete_entries(repo):
    assert _run(repo, "init", "00_w") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po"
    _translate(po, ZH)
    header = _header(po)
    assert header["Language"] == "zh_CN" and header["Plural-Forms"] == "nplurals=1; plural=0;"
    assert header["Report-Msgid-Bugs-To"] == catalog.ISSUES
    assert header["Language-Team"] == f"Chinese (simplified) <{catalog.ISSUES}>"
    assert header["Content-Type"] == "text/plain; charset=UTF-8"
    # A removed block is dropped, not kept as an obsolete entry (git has its old text).
    _rewrite_cell(repo, 0, "# 00 · Welcome")
    assert _run(repo, "update") == 0
    text = po.read_text(encoding="utf-8")
    assert "#~" not in text and "每个 rank 都运行这个单元格" not in text
    assert checks.check(repo, "zh_CN") == []


def pofile_of(path: Path):
    from translate.storage import po as pofile

    return pofile.pofile.parsefile(str(path))


def test_tidy_fills_placeholders_only(repo):
    assert _run(repo, "init", "00_w") == 0
    store = pofile_of(repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po")
    catalog.tidy(store, "zh_CN", revised="2026-12-06 22:00+0000", translator="A <a@b>")
    assert store.parseheader()["Last-Translator"] == "A <a@b>"
    catalog.tidy(store, "zh_CN", revised="2027-01-01 00:00+0000", translator="B <b@c>")
    fields = store.parseheader()
    assert fields["Last-Translator"] == "A <a@b>"
    assert fields["PO-Revision-Date"] == "2026-12-06 22:00+0000"


def _as_before_issue_37(po: Path, comment: str) -> None:
    """The catalogue as it was: wrapped msgids, an obsolete entry, a change-log header."""
    store = pofile_of(po)
    for unit in store.units:
        if unit.source == "Every rank runs the cell on its own process, four of them.":
            unit.source = "Every rank runs the cell on its own\nprocess, four of them."
    old = store.UnitClass("A block that is gone.")
    old.target = "一个已删除的块。"
    old.makeobsolete()
    store.addunit(old)
    header = store.header()
    header.removenotes()
    header.addnote(comment, origin="translator")
    store.updateheader(Language_Team="LANGUAGE <LL@li.org>", Report_Msgid_Bugs_To="")
    po.write_bytes(catalog.serialize(store))


def test_the_migration_carries_every_translation_to_its_unwrapped_msgid(repo, capsys, monkeypatch):
    from i18n import migrate

    _rewrite_cell(repo, 0, WRAPPED)
    assert _run(repo, "init", "00_w") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po"
    _translate(po, ZH_WRAPPED)
    assert _run(repo, "update") == 0
    copies = {p: p.read_bytes() for p in (repo / "notebooks" / "zh_CN").rglob("*.ipynb")}
    comment = "Chinese (zh_CN) translation of 00_w.\nTranslated by x (2026-12-02).\nRead by y."
    _as_before_issue_37(po, comment)
    # what the old extraction left: a wrapped msgid the new one does not look for
    assert any("not in the catalogue" in p for p in checks.check(repo, "zh_CN"))
    summary = migrate.Summary("x (2026-12-02)", "y (2026-12-02): 4 entries", "x", "")
    monkeypatch.setitem(
        migrate.SUMMARIES, "00_w", dataclasses.replace(summary, old=migrate._digest(comment))
    )
    capsys.readouterr()
    assert _run(repo, "migrate") == 0
    out = capsys.readouterr().out
    assert "1 msgid(s) unwrapped, 0 merged, 1 obsolete dropped" in out
    assert "translated entries 5 -> 5, fuzzy 0 -> 0" in out
    entry = catalog.Catalogue(po).entries[
        "Every rank runs the cell on its own process, four of them."
    ]
    assert entry.done and not entry.fuzzy
    assert checks.check(repo, "zh_CN") == []
    assert {p: p.read_bytes() for p in copies} == copies  # the copies are as they were
    text = po.read_text(encoding="utf-8")
    assert "#~" not in text and "Read by y." not in text
    assert "# Chinese (zh_CN) translation of 00_w.\n# Translators: x (2026-12-02)\n" in text
    assert "# Reviewed: y (2026-12-02): 4 entries\n" in text
    header = _header(po)
    assert header["Last-Translator"] == "x" and header["Report-Msgid-Bugs-To"] == catalog.ISSUES
    # Again: nothing changes.
    assert _run(repo, "migrate") == 0
    assert po.read_text(encoding="utf-8") == text
    assert "0 msgid(s) unwrapped" in capsys.readouterr().out


def test_the_migration_keeps_a_header_it_has_no_summary_of(repo, capsys):
    assert _run(repo, "init", "00_w") == 0
    po = repo / "i18n" / "zh_CN" / "LC_MESSAGES" / "00_w.po"
    _translate(po, ZH)
    _as_before_issue_37(po, "A change-log nobody summarised.")
    assert _run(repo, "migrate") == 0
    assert "header no summary for this catalogue" in capsys.readouterr().out
    assert "# A change-log nobody summarised." in po.read_text(encoding="utf-8")


def test_every_catalogue_is_in_the_form_issue_37_asks_for():
    """Unwrapped msgids, a filled header with its Translators and Reviewed lines, no #~."""
    from i18n import migrate

    for path in sorted((ROOT / "i18n" / "zh_CN" / "LC_MESSAGES").glob("*.po")):
        if path.stem not in migrate.SUMMARIES:
            continue  # not a document's catalogue (the library's messages)
        store = pofile_of(path)
        wrapped = [u.source[:40] for u in store.units if blocks.unwrap(u.source) != u.source]
        assert not wrapped, (path.name, wrapped)
        assert not [u for u in store.units if u.isobsolete()], path.name
        fields = store.parseheader()
        for key in ("Report-Msgid-Bugs-To", "PO-Revision-Date", "Last-Translator", "Language-Team"):
            assert fields.get(key, "") not in catalog.PLACEHOLDERS, (path.name, key)
        comment = store.header().getnotes("translator").split("\n")
        assert sum(line.startswith("Translators: ") for line in comment) == 1, path.name
        assert sum(line.startswith("Reviewed: ") for line in comment) == 1, path.name
        assert "FUZZY.md" not in path.read_text(encoding="utf-8"), path.name
