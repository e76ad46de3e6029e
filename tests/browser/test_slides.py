"""The built slide decks, opened from disk with the network blocked, as from a USB stick.

`make slides` writes one static reveal.js deck per notebook to
``slides/_build/NN_name.slides.html``, with every script, style and font under
``slides/_build/``. For each deck this test moves through every slide with the
keyboard, opens the speaker notes with the 's' key, and checks that nothing was
asked of the network (a request to anything but a local file or loopback is
aborted and recorded) and that no local file was missing.

$SLIDES_BUILD_DIR, when set, names a folder of built decks to check instead of
running `make slides`.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
from conftest import REPO, save_screenshot
from playwright.sync_api import BrowserContext, Page, Request, Route

MAKE_SLIDES_S = 900
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


@pytest.fixture(scope="module")
def decks() -> list[Path]:
    folder = os.environ.get("SLIDES_BUILD_DIR")
    if folder:
        build = Path(folder).resolve()
    else:
        makefile = (REPO / "Makefile").read_text()
        if not re.search(r"^slides\s*:", makefile, flags=re.MULTILINE):
            pytest.skip("the Makefile has no `slides` target yet (issue 15): no decks to check")
        done = subprocess.run(
            ["make", "slides"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=MAKE_SLIDES_S,
        )
        assert done.returncode == 0, f"make slides failed:\n{done.stdout[-3000:]}{done.stderr}"
        build = REPO / "slides" / "_build"
    # The English decks, and the translated ones in build/<lang>/ (slides/zh_CN/).
    found = sorted(build.glob("*.slides.html")) + sorted(build.glob("*/*.slides.html"))
    assert found, f"no *.slides.html deck in {build}"
    return found


def _is_local(url: str) -> bool:
    parts = urlparse(url)
    if parts.scheme in ("file", "data", "blob", "about"):
        return True
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname in LOCAL_HOSTS


class Offline:
    """Blocks and records every request that would leave the machine."""

    def __init__(self, context: BrowserContext) -> None:
        self.outside: list[str] = []
        self.failed: list[str] = []
        context.route("**/*", self._route)
        context.on("request", self._seen)
        context.on("requestfailed", self._failed)

    def _route(self, route: Route) -> None:
        if _is_local(route.request.url):
            route.continue_()
        else:
            route.abort("internetdisconnected")

    def _seen(self, request: Request) -> None:
        if not _is_local(request.url):
            self.outside.append(request.url)

    def _failed(self, request: Request) -> None:
        if _is_local(request.url):  # outside requests fail on purpose
            self.failed.append(f"{request.url} ({request.failure})")


# The present slide: a <section> with class "present" and no present <section> inside.
PRESENT = "section.present:not(:has(section.present))"
LEAVES = ".reveal .slides section:not(:has(section))"


def _position(page: Page) -> int:
    """The index of the present slide among all slides (-1 if none is present)."""
    return page.evaluate(
        """([leaves, present]) => {
            const all = Array.from(document.querySelectorAll(leaves));
            return all.indexOf(document.querySelector('.reveal .slides ' + present));
        }""",
        [LEAVES, PRESENT],
    )


def check_deck(context: BrowserContext, deck: Path) -> list[str]:
    """Walk through one deck and open its notes; return what went wrong."""
    problems: list[str] = []
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(deck.as_uri())
    try:
        page.wait_for_selector(".reveal.ready", timeout=20_000)
    except Exception:
        return [f"reveal.js did not start (page errors: {errors})"]
    total = page.locator(LEAVES).count()
    if total < 2:
        problems.append(f"only {total} slide(s)")

    # Every slide, in order, with the presenter's key for "next" (space).
    seen = [_position(page)]
    for _ in range(total * 4):  # fragments take extra presses
        if seen[-1] == total - 1:
            break
        page.keyboard.press("Space")
        seen.append(_position(page))
    reached = sorted(set(seen))
    if reached != list(range(total)):
        missed = sorted(set(range(total)) - set(reached))
        problems.append(f"slides never shown while moving through the deck: {missed}")
    if seen != sorted(seen):
        problems.append(f"the slides did not go forward in order: {seen}")

    # Speaker notes: go to the first slide that has some, press 's'.
    with_notes = page.evaluate(
        f"""() => Array.from(document.querySelectorAll({LEAVES!r}))
            .findIndex(s => s.querySelector('aside.notes') && s.querySelector('aside.notes')
                .textContent.trim())"""
    )
    if with_notes < 0:
        problems.append("no slide has speaker notes")
    else:
        page.keyboard.press("Home")
        for _ in range(total * 4):
            if _position(page) >= with_notes:
                break
            page.keyboard.press("Space")
        expected = page.locator(f"{PRESENT} aside.notes").first.text_content() or ""
        try:
            with context.expect_page(timeout=10_000) as opened:
                page.keyboard.press("s")
        except Exception:
            problems.append("pressing 's' opened no speaker view")
        else:
            notes = opened.value
            words = " ".join(expected.split()[:6])
            try:
                notes.wait_for_function(
                    "([sel, words]) => { const el = document.querySelector(sel);"
                    " return el && el.textContent.replace(/\\s+/g, ' ').includes(words); }",
                    arg=[".speaker-controls-notes:not(.hidden) .value", words],
                    timeout=15_000,
                )
            except Exception:
                save_screenshot(notes, f"deck-{deck.stem}-speaker-view")
                problems.append(f"the speaker view did not show this slide's notes: {words!r}")
            notes.close()
    if errors:
        problems.append(f"JavaScript errors: {errors[:3]}")
    if problems:
        save_screenshot(page, f"deck-{deck.stem}")
    page.close()
    return problems


def test_decks_work_offline(context: BrowserContext, decks: list[Path]) -> None:
    offline = Offline(context)
    report = []
    for deck in decks:
        report += [f"{deck.name}: {problem}" for problem in check_deck(context, deck)]
    if offline.outside:
        report.append(f"asked the network for: {sorted(set(offline.outside))}")
    if offline.failed:
        report.append(f"local files that could not be loaded: {sorted(set(offline.failed))}")
    assert not report, "\n".join(report)


# ------------------------------------------------------------------ every slide fits a projector
#: A projector's screen (the course's design: decks fit 1280x720).
PROJECTOR = {"width": 1280, "height": 720}
#: What the present slide shows outside the screen or cut by a box that clips it: every text
#: node (MathJax's hidden copies aside) and picture, as "code|output|text cut at the
#: right|bottom|top"; and the slide's title, its math written back as $TeX$.
FIT_JS = """() => {
  const slide = document.querySelector(
    '.reveal .slides section.present:not(:has(section.present))');
  const heading = slide.querySelector('h1, h2, h3, h4, h5, h6');
  let title = '';
  if (heading) {
    const copy = heading.cloneNode(true);
    copy.querySelectorAll('script[type^="math/tex"]')
      .forEach(s => s.replaceWith('$' + s.textContent + '$'));
    copy.querySelectorAll('.MathJax, .MathJax_CHTML, .MathJax_SVG, .MathJax_Preview, '
      + '.MJX_Assistive_MathML, .anchor-link').forEach(e => e.remove());
    title = copy.textContent.replace(/\\s+/g, ' ').trim();
  }
  const W = window.innerWidth, H = window.innerHeight, E = 1;
  const problems = new Set();
  const where = el => el.closest('.jp-CodeCell .jp-InputArea') ? 'code'
    : el.closest('.jp-OutputArea') ? 'output' : 'text';
  const clipping = el => {
    const found = [];
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const cs = getComputedStyle(a);
      const clips = cs.overflowX !== 'visible' || cs.overflowY !== 'visible';
      if (clips) found.push(a.getBoundingClientRect());
    }
    return found;
  };
  const judge = (el, rects) => {
    const boxes = [...clipping(el), {left: 0, top: 0, right: W, bottom: H}];
    for (const r of rects) {
      if (r.width === 0 && r.height === 0) continue;
      for (const c of boxes) {
        if (r.right > c.right + E) problems.add(where(el) + ' cut at the right');
        if (r.bottom > c.bottom + E) problems.add(where(el) + ' cut at the bottom');
        if (r.top < c.top - E) problems.add(where(el) + ' cut at the top');
      }
    }
  };
  const hidden = 'aside.notes, script, style, .MJX_Assistive_MathML, .MathJax_Preview';
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || el.closest(hidden) || !el.getClientRects().length) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    judge(el, Array.from(range.getClientRects()));
  }
  for (const el of slide.querySelectorAll('img, svg, canvas, video, iframe')) {
    if (el.closest(hidden) || el.parentElement.closest('svg')) continue;
    judge(el, [el.getBoundingClientRect()]);
  }
  return {title, problems: [...problems].sort()};
}"""

#: Slides that do not fit 1280x720 today (issue 28), per deck: (title, problem). The test
#: accepts these and fails on any other, and on any entry here that no longer occurs: when
#: a slide is fixed, delete its line; never add one. This list only shrinks, to empty.
KNOWN_OVERFLOW: dict[str, list[tuple[str, str]]] = {}


def deck_name(deck: Path) -> str:
    """``07_overlap.slides.html``, or ``zh_CN/00_welcome.slides.html`` for a translated deck."""
    translated = (deck.parent.parent / "assets").is_dir()
    return f"{deck.parent.name}/{deck.name}" if translated else deck.name


def slide_problems(
    context: BrowserContext, deck: Path, known: list[tuple[str, str]]
) -> list[tuple[int, str, str]]:
    """(slide index, title, problem) for every slide of ``deck`` that does not fit the screen;
    a screenshot of each slide with a problem not in ``known``."""
    page = context.new_page()
    page.goto(deck.as_uri())
    page.wait_for_selector(".reveal.ready", timeout=20_000)
    # no slide transition: each slide is measured where it rests
    page.add_style_tag(
        content=".reveal .slides, .reveal .slides section { transition: none !important; }"
    )
    total = page.locator(LEAVES).count()
    found: list[tuple[int, str, str]] = []
    measured: set[int] = set()
    for _ in range(total * 4):  # fragments take extra presses
        index = _position(page)
        if index not in measured:
            measured.add(index)
            page.wait_for_timeout(300)  # MathJax re-renders a slide when it is shown
            result = page.evaluate(FIT_JS)
            title = result["title"] or f"slide {index}"
            here = [(index, title, problem) for problem in result["problems"]]
            if any((title, problem) not in known for _, _, problem in here):
                save_screenshot(page, f"fit-{deck.stem}-{index}")
            found += here
        if index == total - 1:
            break
        page.keyboard.press("Space")
    page.close()
    assert len(measured) == total, f"{deck.name}: measured {sorted(measured)} of {total} slides"
    return found


def test_every_slide_fits_a_projector(browser: object, decks: list[Path]) -> None:
    """Every slide of every built deck, at 1280x720: no text, code, output or picture off
    the screen or cut by a box that scrolls or clips it."""
    context = browser.new_context(viewport=PROJECTOR)
    Offline(context)
    report = []
    try:
        for deck in decks:
            name = deck_name(deck)
            known = KNOWN_OVERFLOW.get(name, [])
            found = slide_problems(context, deck, known)
            report += [
                f"{name} slide {index} ({title!r}): {problem}"
                for index, title, problem in found
                if (title, problem) not in known
            ]
            still = {(title, problem) for _, title, problem in found}
            report += [
                f"{name}: a KNOWN_OVERFLOW entry no longer occurs (delete it): {entry!r}"
                for entry in known
                if entry not in still
            ]
    finally:
        context.close()
    screen = f"{PROJECTOR['width']}x{PROJECTOR['height']}"
    assert not report, f"slides that do not fit {screen}:\n" + "\n".join(report)
