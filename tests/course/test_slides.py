"""The workshop decks in slides/: speaker notes everywhere, and HTML that loads nothing online."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
from labkit.exercises import pair_difference

ROOT = Path(__file__).resolve().parents[2]
SLIDES = ROOT / "slides"
DECKS = sorted(SLIDES.glob("[0-9][0-9]_*.ipynb"))


def _load_build():
    spec = importlib.util.spec_from_file_location("slides_build", SLIDES / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["slides_build"] = module
    spec.loader.exec_module(module)
    return module


build = _load_build()


def test_there_are_decks_and_each_presents_a_notebook():
    assert DECKS, "no decks in slides/"
    notebooks = {p.name for p in (ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb")}
    for deck in DECKS:
        assert deck.name in notebooks, f"{deck.name} has no notebook of the same name"


@pytest.mark.parametrize("deck", DECKS, ids=lambda p: p.stem)
def test_every_slide_has_speaker_notes_and_the_twin_is_in_sync(deck):
    nb = nbformat.read(deck, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "collective-course"
    slides, current, without_notes = 0, None, []
    for cell in nb.cells:
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind in ("slide", "subslide"):
            if current is not None and not current[1]:
                without_notes.append(current[0])
            current = [cell.source.splitlines()[0] if cell.source else "(empty)", False]
            slides += 1
        elif kind == "notes" and current is not None:
            current[1] = True
    if current is not None and not current[1]:
        without_notes.append(current[0])
    assert slides >= 5
    assert not without_notes, f"slides without speaker notes: {without_notes}"
    assert pair_difference(deck) is None


def test_external_references_finds_what_a_browser_would_fetch():
    html = """
    <script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>
    <link rel="stylesheet" href="//unpkg.com/reveal.js@4.0.2/dist/reveal.css">
    <style>@import "https://fonts.googleapis.com/css?family=Lato";
    .x { background: url('http://example.com/a.png') }</style>
    <a href="https://pytorch.org/docs">a link the reader may follow</a>
    <img src="data:image/png;base64,AAAA"><script src="assets/local.js"></script>
    """
    found = build.external_references(html)
    assert found == [
        "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js",
        "//unpkg.com/reveal.js@4.0.2/dist/reveal.css",
        "https://fonts.googleapis.com/css?family=Lato",
        "http://example.com/a.png",
    ]


def test_external_references_finds_what_scripts_load_as_modules():
    """nbconvert's reveal template loads reveal.js through require.js, mermaid as an ES
    module: neither has a src attribute, and both would reach the network."""
    html = """
    <script type="module">
      import mermaid from 'https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs';
      import "//esm.sh/side-effect";
      export { x } from "https://esm.sh/x";
      const later = await import('https://unpkg.com/late@1/index.js');
    </script>
    <script>
    require.config({paths: {d3: "https://d3js.org/d3.v7.min"}});
    require(
        {waitSeconds: 15},
        ["https://unpkg.com/reveal.js@4.0.2/dist/reveal.js", "assets/notes.js"],
        function (Reveal) { var s = "https://example.com/not-loaded"; });
    </script>
    <p>Text may say import x from 'https://example.com/y' outside a script.</p>
    """
    assert build.external_references(html) == [
        "https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs",
        "//esm.sh/side-effect",
        "https://esm.sh/x",
        "https://unpkg.com/late@1/index.js",
        "https://d3js.org/d3.v7.min",
        "https://unpkg.com/reveal.js@4.0.2/dist/reveal.js",
    ]


def test_a_module_the_deck_loads_must_exist_locally(tmp_path):
    (tmp_path / "reveal.js").write_text("")
    html = '<script>require({}, ["reveal.js", "plugin/notes.js"], function (R) {});</script>'
    assert build.external_references(html, tmp_path) == ["missing: plugin/notes.js"]


def test_check_fails_a_deck_that_imports_from_a_cdn(tmp_path):
    deck = tmp_path / "x.slides.html"
    deck.write_text(
        '<aside class="notes">n</aside><script type="module">'
        "import mermaid from 'https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs';"
        "</script>"
    )
    assert build.main(["check", str(deck)]) == 1
    assert build.check([deck]) == [
        "x.slides.html: https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs"
    ]


def test_external_references_reads_local_style_sheets_and_reports_missing_files(tmp_path):
    (tmp_path / "theme.css").write_text("@import url(https://fonts.example/x.css);")
    html = '<link href="theme.css"><script src="gone.js"></script>'
    assert build.external_references(html, tmp_path) == [
        "https://fonts.example/x.css",
        "missing: gone.js",
    ]


def test_a_tampered_tarball_is_refused():
    package = build.PACKAGES[0]
    with pytest.raises(build.BuildError, match="integrity mismatch"):
        build.verify(b"not reveal.js", package.integrity)


def test_a_built_deck_points_only_at_local_assets_and_has_notes(tmp_path):
    html_path = build.build_deck(SLIDES / "00_welcome.ipynb", tmp_path)
    assert html_path.name == "00_welcome.slides.html"
    html = html_path.read_text(encoding="utf-8")
    assert build.external_references(html) == []
    assert '<aside class="notes">' in html
    assert "assets/reveal.js/plugin/notes/notes.js" in html  # the 's' key opens the notes
    assert "assets/mathjax/MathJax.js" in html


@pytest.mark.skipif(
    not (build.ASSETS / "reveal.js").is_dir(), reason="assets not built (run `make slides`)"
)
def test_built_decks_find_every_local_file():
    built = sorted(build.BUILD.glob("*.slides.html"))
    assert built, "no built decks: run `make slides`"
    assert build.check(built) == []


def test_slides_show_code_without_formatter_directives(tmp_path):
    source = "x = f(a,  b)  # fmt: skip\n# fmt: off\ny = [1,  2]\n# fmt: on\nz = 1  # why: kept\n"
    assert build.shown_code(source) == "x = f(a,  b)\ny = [1,  2]\nz = 1  # why: kept\n"
    # a deck whose shown code has `# fmt: skip` (deck 07's skipped set-up cells have it too)
    deck = nbformat.read(SLIDES / "07_overlap.ipynb", as_version=4)
    deck.cells = [
        nbformat.v4.new_markdown_cell(
            "## A slide", metadata={"slideshow": {"slide_type": "slide"}}
        ),
        nbformat.v4.new_code_cell(
            "CFG = workload.Config(in_features=256,\n                 compute_ms=30)  # fmt: skip",
            metadata={"slideshow": {"slide_type": "-"}},
        ),
    ]
    nbformat.write(deck, tmp_path / "07_overlap.ipynb")
    html = build.build_deck(tmp_path / "07_overlap.ipynb", tmp_path / "build")
    html = html.read_text(encoding="utf-8")
    assert "fmt:" not in html and "compute_ms" in html
