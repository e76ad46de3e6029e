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
        build = Path(folder)
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
    except Exception:  # noqa: BLE001 - reported below with the page's errors
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
        except Exception:  # noqa: BLE001 - reported as a problem of this deck
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
            except Exception:  # noqa: BLE001
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
