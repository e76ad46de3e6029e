"""The zh-CN edition in JupyterLab's Chinese interface: notebook 00, run all, read in Chinese.

JupyterLab is started the way ``make lab COURSE_LANG=zh_CN`` starts it (the default
setting in ``jupyter/lang/zh_CN/`` through JUPYTER_CONFIG_PATH, the language pack of the
``zh-cn`` extra), on the learner's copy ``notebooks/zh_CN/00_welcome.ipynb``. The test
runs every cell, then checks that the headings are the catalogue's Chinese ones and that
Chromium draws their Han characters with a CJK font (asked of the browser itself, through
the DevTools protocol: without such a font it draws boxes).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from conftest import (
    REPO,
    Lab,
    _free_port,
    _kernelspec,
    _results_dir,
    _stop,
    _user_settings,
    _wait_until_up,
    still_running,
)
from playwright.sync_api import Locator, Page, expect

NOTEBOOK = "00_welcome.ipynb"
RUN_ALL_S = 150
KERNEL_START_S = 60
_HAN = re.compile(r"[\u3400-\u9fff]")
#: Font families with Chinese (simplified) glyphs: Debian's fonts-noto-cjk, and the usual
#: others. (Without lang="zh-..." on the page, Chromium draws Han with the Japanese variant.)
CJK_FAMILY = re.compile(r"CJK SC|Sans SC|Serif SC|WenQuanYi|Droid Sans Fallback|Hei|Song")


def _headings(path: Path) -> list[str]:
    """The text of every Markdown heading of a notebook, as the catalogue made them."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return [re.sub(r"[`*]", "", h).strip() for h in re.findall(r"^#{1,6}\s+(.*)$", text, re.M)]


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        import jupyterlab_language_pack_zh_CN  # noqa: F401
    except ImportError:
        pytest.fail(
            "JupyterLab's Chinese language pack is missing: `make test-browser` installs it "
            "(the zh-cn extra), or `pip install -e '.[zh-cn]'`"
        )
    base = tmp_path_factory.mktemp("lab-zh")
    root = base / "notebooks"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "zh_CN" / NOTEBOOK, root)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_PATH=str(_kernelspec(base / "share")),
        JUPYTER_CONFIG_PATH=str(REPO / "jupyter" / "lang" / "zh_CN"),  # as make lab does
        JUPYTERLAB_SETTINGS_DIR=str(_user_settings(base / "user-settings")),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        IPYTHONDIR=str(base / "ipython"),
        LABSUPPORT_LIVE_AFTER="20",
        PYTHONUNBUFFERED="1",
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "jupyterlab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Lab(f"http://127.0.0.1:{port}", token, root, proc, log)
    try:
        _wait_until_up(server)
        yield server
    finally:
        leftovers = _stop(server)
        shutil.copy(log, _results_dir() / "jupyterlab-zh.log")
    if leftovers:
        pytest.fail(f"processes left running after JupyterLab stopped (killed now): {leftovers}")


def _menu(page: Page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def _cell_with(notebook: Locator, text: str) -> Locator:
    cells = notebook.locator(".jp-CodeCell").filter(
        has=notebook.page.locator(".jp-InputArea-editor", has_text=text)
    )
    expect(cells).to_have_count(1)
    return cells.first


def _fonts_of(page: Page, selector: str) -> list[dict]:
    """The platform fonts Chromium used for the text of the first node matching ``selector``."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, f"nothing matches {selector}"
    return cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


def test_the_chinese_notebook_runs_and_reads_in_chinese(page: Page, lab_zh: Lab, step) -> None:
    expected = _headings(REPO / "notebooks" / "zh_CN" / NOTEBOOK)
    assert len(expected) >= 6 and all(_HAN.search(h) for h in expected), expected

    page.goto(lab_zh.open_url(NOTEBOOK))
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    expect(notebook.locator(".jp-CodeCell").first).to_be_attached(timeout=KERNEL_START_S * 1000)
    status = page.locator(".jp-StatusBar-Widget")
    # JupyterLab's own words are Chinese: the kernel is "空闲" (idle), the menus too.
    expect(status).to_contain_text("Collective communication course | 空闲", timeout=60_000)
    menus = page.locator(".lm-MenuBar-itemLabel").all_text_contents()
    assert {"运行", "设置", "帮助"} <= set(menus), menus
    # JupyterLab says the page is Chinese, which makes Chromium pick Chinese glyphs.
    assert page.evaluate("document.documentElement.lang").startswith("zh")
    step("opened")

    _menu(page, "运行", "运行所有单元格")
    last = _cell_with(notebook, "%ranks shutdown")
    # The magic's own status line stays English (the graders, the launcher's errors and
    # doctor() speak Chinese: the notebook's first cell calls lab.set_language("zh_CN")).
    expect(last.locator(".jp-OutputArea-output")).to_contain_text(
        "cluster shut down", timeout=RUN_ALL_S * 1000
    )
    expect(status).to_contain_text("| 空闲", timeout=30_000)
    step("ran-all")
    cells = notebook.locator(".jp-CodeCell")
    prompts = [
        (cells.nth(i).locator(".jp-InputArea-prompt").text_content() or "").strip()
        for i in range(cells.count())
    ]
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts
    summed = "\n".join(
        _cell_with(notebook, "dist.all_reduce(x)")
        .locator(".jp-OutputArea-output")
        .all_text_contents()
    )
    assert "[rank 3] [60, 64, 68]" in summed, summed

    # The headings are the Chinese ones, in order.
    rendered = notebook.locator(".jp-MarkdownOutput").locator("h1, h2, h3")
    shown = [t.replace("¶", "").strip() for t in rendered.all_text_contents()]
    assert shown == expected, shown

    # ... and Chromium draws their Han characters with a CJK font, not boxes.
    title = notebook.locator(".jp-MarkdownOutput h1").first
    title.scroll_into_view_if_needed()
    title.screenshot(path=str(_results_dir() / "zh-heading.png"))
    fonts = _fonts_of(page, ".jp-MarkdownOutput h1")
    han = len(_HAN.findall(expected[0]))
    cjk = [f for f in fonts if CJK_FAMILY.search(f["familyName"])]
    assert cjk and sum(f["glyphCount"] for f in cjk) >= han, (
        f"the heading's {han} Chinese characters are not drawn with a Chinese font: {fonts} "
        "(is fonts-noto-cjk installed? tests/browser/ensure_cjk_font.sh)"
    )

    lab_zh.shutdown_kernels()
    assert not still_running(lab_zh.workers(), 15), "worker processes left after the kernel"
