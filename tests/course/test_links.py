"""Every relative link in the notebooks, README.md and REFERENCES.md leads to a file of the
repository (and to a heading that exists, for a ``file.md#section`` link); the Chinese guides'
links lead to the Chinese copies.

The test reads the file system, so a notebook that does not exist yet cannot be linked
("still to come" in plain text is fine), and one that is added later may be linked at once.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from labkit import exercises

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HREF = re.compile(r"""<a\s[^>]*href=["']([^"']+)["']""")


def _markdown_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def relative_links(text: str) -> list[str]:
    """The link targets in markdown text that point into the repository (not web, not mail)."""
    targets = _LINK.findall(text) + _HREF.findall(text)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def github_anchor(heading: str) -> str:
    """The anchor a code host gives a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+\s+(.*)$", _markdown_of(path), flags=re.MULTILINE)
    return {github_anchor(h) for h in headings}


def _documents() -> list[Path]:
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb")) + sorted(
        (NOTEBOOKS / "solutions").glob("*.ipynb")
    )
    return [ROOT / "README.md", ROOT / "REFERENCES.md", *notebooks]


def test_the_link_finder_sees_markdown_and_html_links_but_not_web_ones():
    text = '[a](x.ipynb) ![img](p.png) [w](https://e.org) [s](#top) <a href="../R.md#b">R</a>'
    assert relative_links(text) == ["x.ipynb", "../R.md#b"]
    assert github_anchor("torch.distributed") == "torchdistributed"
    assert github_anchor("Overlap, DDP and sharding") == "overlap-ddp-and-sharding"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document):
    broken = []
    for target in relative_links(_markdown_of(document)):
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve()
        if not linked.is_file():
            broken.append(f"{target}: no such file in the repository")
        elif not linked.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: {linked.name} has no heading #{anchor}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_a_link_out_of_notebooks_is_adjusted_in_the_learners_copy():
    solution = nbformat.v4.new_notebook()
    solution.cells = [nbformat.v4.new_markdown_cell("See [refs](../../REFERENCES.md#ncc).")]
    learner = exercises.make_learner_notebook(solution)
    assert learner.cells[0].source == "See [refs](../REFERENCES.md#ncc)."


@pytest.mark.parametrize("name", ["README.zh-CN.md", "slides/INSTRUCTOR.zh-CN.md"])
def test_the_chinese_guides_links_lead_to_files_and_to_the_chinese_copies(name):
    """A Chinese reader stays in Chinese: every relative link of the zh guides exists, and
    none leads to an English notebook, deck or guide that has a Chinese copy (except the
    preface's own link labelled English)."""
    sys.path.insert(0, str(ROOT))
    from i18n import checks, documents

    path = ROOT / name
    assert checks.link_problems(path, ROOT) == []
    copies = documents.counterparts(ROOT, "zh_CN")
    english = []
    for match in re.finditer(r"(?<!!)\[([^\]]*)\]\(<?([^)\s>]+)>?\)", path.read_text()):
        label, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        linked = Path(os.path.normpath(path.parent / target.split("#")[0])).relative_to(ROOT)
        if linked in copies and label != "English":
            english.append(f"[{label}]({target}) instead of {copies[linked]}")
    assert not english, english
