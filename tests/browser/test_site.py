"""The course's site (`make site`), served from its folder and read in Chromium, offline.

`make site` builds ``site/_build/html/``: ``en/`` and ``zh_CN/`` (Sphinx pages of the
solution notebooks, landing page, guide, decks list, references) and ``slides/`` (the
decks). Served with ``python -m http.server`` on loopback, as a reader would:

* every page loads with no console error, no failed local file and no request that
  leaves the machine (those are aborted and recorded), and does not scroll sideways at
  1280 px;
* the language switch of every lesson goes to the same lesson in the other language;
* search finds a word of notebook 05 (in both languages);
* a stored widget and a matplotlib plot render;
* every internal link and anchor of every page resolves (no browser needed), and the
  landing page of each language reaches every lesson, deck, learner's copy, the guide
  and the references.

$SITE_BUILD_DIR, when set, names a built site to check instead of running `make site`.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import REPO, save_screenshot
from playwright.sync_api import BrowserContext, Page
from test_slides import Offline

MAKE_SITE_S = 1200
WIDTH = 1280
LANGS = ("en", "zh_CN")
LESSONS = sorted(p.stem for p in (REPO / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def site() -> Path:
    folder = os.environ.get("SITE_BUILD_DIR")
    if folder:
        return Path(folder).resolve()
    done = subprocess.run(
        ["make", "site"], cwd=REPO, capture_output=True, text=True, timeout=MAKE_SITE_S
    )
    assert done.returncode == 0, f"make site failed:\n{done.stdout[-3000:]}{done.stderr[-5000:]}"
    return REPO / "site" / "_build" / "html"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    """``python -m http.server`` in the site's folder, as the README says to read it."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=site,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def offline(browser: object, request: pytest.FixtureRequest) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": WIDTH, "height": 900})
    ctx.set_default_timeout(30_000)
    ctx.offline_log = Offline(ctx)
    try:
        yield ctx
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            for i, pg in enumerate(ctx.pages):
                save_screenshot(pg, f"{request.node.name}-end-{i}")
        ctx.close()


def pages(site: Path) -> list[str]:
    """Every HTML page of both languages and the root, relative to the site's folder."""
    found = ["index.html"]
    for lang in LANGS:
        found += sorted(
            str(p.relative_to(site))
            for p in (site / lang).glob("*.html")
            if not p.name.startswith("_")
        )
    return found


def _open(page: Page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    # Widgets and MathJax render after "load": wait until they are done.
    if page.locator("script[type='application/vnd.jupyter.widget-view+json']").count():
        page.wait_for_function(
            "() => document.querySelectorAll('.jupyter-widgets').length > 0"
            " && !document.querySelector('.jupyter-widgets-loading')",
            timeout=30_000,
        )
    page.wait_for_function(
        "() => !window.MathJax || !MathJax.Hub || MathJax.Hub.queue.pending === 0"
        " && MathJax.Hub.queue.running === 0",
        timeout=30_000,
    )


def test_every_page_loads_offline_without_errors_and_fits_1280px(
    site: Path, server: str, offline: BrowserContext
) -> None:
    problems: list[str] = []
    listed = pages(site)
    assert len(listed) > 2 * len(LESSONS), f"too few pages: {listed}"
    for path in listed:
        page = offline.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda msg, errors=errors: (
                errors.append(f"console: {msg.text}") if msg.type == "error" else None
            ),
        )
        _open(page, f"{server}/{path}")
        problems += [f"{path}: {e}" for e in errors]
        wide = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        if wide[0] > wide[1]:
            problems.append(f"{path}: scrolls sideways at {WIDTH} px ({wide[0]} > {wide[1]})")
            save_screenshot(page, f"site-wide-{path.replace('/', '-')}")
        page.close()
    log = offline.offline_log
    problems += [f"request left the machine: {u}" for u in log.outside]
    problems += [f"local file failed: {u}" for u in log.failed]
    assert not problems, "\n".join(problems)


def _title(page: Page) -> str:
    return page.locator("article h1").first.inner_text().strip().rstrip("#").strip()


def _notebook_title(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        found = re.search(r"^# (.+)$", "".join(cell["source"]), re.M)
        if cell["cell_type"] == "markdown" and found:
            return found.group(1).strip()
    raise AssertionError(f"{path}: no title")


@pytest.mark.parametrize("lesson", [LESSONS[0], "05_topology", LESSONS[-1]])
def test_the_language_switch_lands_on_the_same_lesson(
    site: Path, server: str, offline: BrowserContext, lesson: str
) -> None:
    zh = REPO / "notebooks" / "zh_CN" / "solutions" / f"{lesson}.ipynb"
    titles = {
        "en": _notebook_title(REPO / "notebooks" / "solutions" / f"{lesson}.ipynb"),
        "zh_CN": _notebook_title(zh) if zh.exists() else None,
    }
    page = offline.new_page()
    page.goto(f"{server}/en/{lesson}.html")
    assert _title(page) == titles["en"]
    page.locator(".course-lang-switch a[hreflang='zh-CN']").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/zh_CN/{lesson}.html"), page.url
    if titles["zh_CN"]:
        assert _title(page) == titles["zh_CN"]
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.locator(".course-lang-switch a[hreflang='en']").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/en/{lesson}.html"), page.url
    assert _title(page) == titles["en"]


# A word of notebook 05 in each language (HCCS: Ascend's links inside a server; 拓扑: topology).
SEARCHES = {"en": "HCCS", "zh_CN": "拓扑"}


@pytest.mark.parametrize("lang", LANGS)
def test_search_finds_a_word_of_notebook_05(
    site: Path, server: str, offline: BrowserContext, lang: str
) -> None:
    word = SEARCHES[lang]
    source = site / lang / "05_topology.html"
    assert word in source.read_text(encoding="utf-8"), f"{word!r} is not on {source}"
    page = offline.new_page()
    # The search box of every page leads here; type into it as a reader would.
    page.goto(f"{server}/{lang}/index.html")
    page.keyboard.press("Control+k")
    box = page.locator("input[name='q']:visible").first
    box.fill(word)
    box.press("Enter")
    page.wait_for_url(re.compile(r"search\.html\?q="))
    results = page.locator("#search-results li a")
    results.first.wait_for(timeout=30_000)
    found = [unquote(a) for a in results.evaluate_all("els => els.map(e => e.href)")]
    assert any(f"/{lang}/05_topology.html" in href for href in found), found
    # A word that is on no page finds nothing.
    page.goto(f"{server}/{lang}/search.html?q=zyxwvunotaword")
    page.wait_for_function(
        "() => document.querySelector('#search-results p, #search-results h2')", timeout=30_000
    )
    assert page.locator("#search-results li").count() == 0


@pytest.mark.parametrize("lang", LANGS)
def test_a_stored_widget_and_a_plot_render(
    site: Path, server: str, offline: BrowserContext, lang: str
) -> None:
    page = offline.new_page()
    _open(page, f"{server}/{lang}/03_ring_allreduce.html")
    slider = page.locator(".jupyter-widgets .widget-slider, .jupyter-widgets .slider").first
    slider.wait_for(state="visible")
    box = slider.bounding_box()
    assert box and box["width"] > 50, f"the slider is not drawn: {box}"
    widget_text = page.locator(".jupyter-widgets").first.inner_text()
    assert widget_text.strip(), "the widget shows nothing"
    # Plots: matplotlib's PNGs, decoded by the browser (naturalWidth > 0).
    sizes = page.locator(".cell_output img").evaluate_all(
        "imgs => imgs.map(i => [i.naturalWidth, i.getBoundingClientRect().width])"
    )
    assert sizes, "no plot on the page"
    assert all(natural > 0 and shown > 0 for natural, shown in sizes), sizes
    assert not offline.offline_log.outside, offline.offline_log.outside


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name") if tag != "meta" else ():
            if values.get(key):
                self.ids.add(values[key])
        for key in ("href", "src"):
            if values.get(key) and tag in ("a", "link", "script", "img", "iframe"):
                self.links.append(values[key])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def _crawl(site: Path) -> tuple[dict[Path, _Links], list[str]]:
    """Every Sphinx page and the root, parsed; the broken internal links and anchors."""
    parsed = {
        p: _parse(p)
        for p in [site / "index.html"]
        + [p for lang in LANGS for p in (site / lang).rglob("*.html") if "_static" not in p.parts]
    }
    broken = []
    for path, found in parsed.items():
        for link in found.links:
            parts = urlparse(link)
            if parts.scheme or link.startswith("//") or link.startswith(("mailto:", "data:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            where = f"{path.relative_to(site)}: {link}"
            if not target.is_relative_to(site.resolve()):
                broken.append(f"{where} (outside the site)")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{where} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html" and "slides" not in target.parts:
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{where} (no anchor #{parts.fragment})")
    return parsed, broken


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    parsed, broken = _crawl(site)
    assert len(parsed) > 2 * len(LESSONS)
    assert not broken, f"{len(broken)} broken link(s):\n" + "\n".join(broken[:50])


def _reachable(site: Path, start: Path) -> set[Path]:
    """The files reached from ``start`` following links within the site (not into decks)."""
    seen, todo = {start}, [start]
    while todo:
        path = todo.pop()
        if path.suffix != ".html" or "slides" in path.relative_to(site).parts:
            continue
        for link in _parse(path).links:
            parts = urlparse(link)
            if parts.scheme or not parts.path:
                continue
            target = (path.parent / unquote(parts.path)).resolve()
            if target.exists() and target.is_file() and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("lang", LANGS)
def test_the_landing_page_reaches_every_lesson_deck_and_guide(site: Path, lang: str) -> None:
    site = site.resolve()
    reached = {str(p.relative_to(site)) for p in _reachable(site, site / lang / "index.html")}
    decks = site / "slides" / ("zh_CN" if lang == "zh_CN" else "")
    assert list(decks.glob("*.slides.html")), f"no decks in {decks}"
    expected = {f"{lang}/{name}.html" for name in LESSONS}
    expected |= {f"{lang}/instructor.html", f"{lang}/references.html"}
    expected |= {str(p.relative_to(site)) for p in decks.glob("*.slides.html")}
    missing = sorted(expected - reached)
    assert not missing, f"not reachable from {lang}/index.html: {missing}"
    # Each lesson's learner's copy (exercises to fill in), byte for byte the committed one.
    learners = REPO / "notebooks" / ("zh_CN" if lang == "zh_CN" else "")
    downloads = [site / p for p in reached if "/_downloads/" in f"/{p}"]
    for name in LESSONS:
        copy = learners / f"{name}.ipynb"
        if not copy.exists():  # not translated yet: the English learner's copy
            copy = REPO / "notebooks" / f"{name}.ipynb"
        same = [d for d in downloads if d.name == copy.name and d.read_bytes() == copy.read_bytes()]
        assert same, f"{name}: its learner's copy {copy} is not downloadable from {lang}/"
