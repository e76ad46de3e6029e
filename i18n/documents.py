"""The documents the course translates, and how a translated copy of each is made.

Every notebook, deck and guide is one *document* with one catalogue (its *domain*):

* ``notebooks/solutions/NN_name.ipynb`` (domain ``NN_name``) gives
  ``notebooks/zh_CN/solutions/NN_name.ipynb`` and the learner's ``notebooks/zh_CN/NN_name.ipynb``;
* ``slides/NN_name.ipynb`` (``slides-NN_name``) gives ``slides/zh_CN/NN_name.ipynb``;
* ``README.md`` (``README``) gives ``README.zh-CN.md``;
* ``slides/INSTRUCTOR.md`` (``INSTRUCTOR``) gives ``slides/INSTRUCTOR.zh-CN.md``.

A copy is generated only when its catalogue ``i18n/<lang>/LC_MESSAGES/<domain>.po``
exists (a guide also when it has a preface, ``i18n/<lang>/preface/<domain>.md``: text
written in the target language, such as what stays English). Code cells, outputs, cell
ids and metadata are the English ones; each markdown block is replaced by its translation
(the English where the catalogue has none yet). A translated notebook also gets a first
code cell that sets labsupport's language, and what labsupport printed (a grader, the
launcher, ``doctor()``) is shown translated (:mod:`i18n.outputs`). Relative links are
rewritten for the copy's folder, to the translated counterpart where there is one.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
from labkit import exercises

from i18n import blocks
from i18n import outputs as outputs_module

ROOT = Path(__file__).resolve().parent.parent
#: The languages the course is translated into, and the suffix of a translated guide.
SUFFIX = {"zh_CN": "zh-CN"}
PREFACE_MARK = "<!-- translated-files -->"

_LINK = re.compile(r"(\]\()(<[^>]*>|[^)\s]+)")
_ATTR = re.compile(r"""(\b(?:href|src)=["'])([^"']+)""")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@dataclass(frozen=True)
class Document:
    """One English source, the catalogue that translates it, and the copies made from both."""

    domain: str
    kind: str  # "notebook", "deck" or "markdown"
    source: Path  # relative to the repository root

    def catalogue(self, lang: str) -> Path:
        """The .po catalogue of this document in ``lang``."""
        return Path("i18n") / lang / "LC_MESSAGES" / f"{self.domain}.po"

    def template(self) -> Path:
        """The .pot template of this document."""
        return Path("i18n") / "templates" / f"{self.domain}.pot"

    def preface(self, lang: str) -> Path:
        """The translator's preface of this document in ``lang``."""
        return Path("i18n") / lang / "preface" / f"{self.domain}.md"

    def outputs(self, lang: str) -> list[Path]:
        """The generated copies, relative to the root (the solution first for a notebook)."""
        if self.kind == "notebook":
            return [
                Path("notebooks") / lang / "solutions" / self.source.name,
                Path("notebooks") / lang / self.source.name,
            ]
        if self.kind == "deck":
            return [self.source.parent / lang / self.source.name]
        return [self.source.with_name(f"{self.source.stem}.{SUFFIX[lang]}{self.source.suffix}")]

    def generated(self, root: Path, lang: str) -> bool:
        """True when this document's translated copies are made (and checked)."""
        if (root / self.catalogue(lang)).exists():
            return True
        return self.kind == "markdown" and (root / self.preface(lang)).exists()


def documents(root: Path = ROOT) -> list[Document]:
    """Every translatable document of the repository at ``root``, notebooks first."""
    found = [
        Document(p.stem, "notebook", p.relative_to(root))
        for p in sorted((root / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))
    ]
    found += [
        Document(f"slides-{p.stem}", "deck", p.relative_to(root))
        for p in sorted((root / "slides").glob("[0-9][0-9]_*.ipynb"))
    ]
    for path, domain in (("README.md", "README"), ("slides/INSTRUCTOR.md", "INSTRUCTOR")):
        if (root / path).exists():
            found.append(Document(domain, "markdown", Path(path)))
    return found


def texts(doc: Document, root: Path = ROOT) -> list[tuple[str, str]]:
    """(location, markdown) of each text to translate: each markdown cell, or the whole file.

    A notebook whose markdown holds written answers adds the learner's stub
    ("*Your answer here.*"), which its learner's copy shows instead.
    """
    if doc.kind == "markdown":
        return [(f"{doc.source}:1", (root / doc.source).read_text(encoding="utf-8"))]
    nb = nbformat.read(root / doc.source, as_version=4)
    found = [
        (f"{doc.source}:{index + 1}", cell.source)
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown"
    ]
    if doc.kind == "notebook" and any(exercises.has_solution(t) for _, t in found):
        found.append((f"{doc.source}:stub", exercises.MARKDOWN_STUB))
    return found


# ------------------------------------------------------------------------ links


def counterparts(root: Path, lang: str) -> dict[Path, Path]:
    """English file -> its translated copy, for every document that is generated."""
    found: dict[Path, Path] = {}
    for doc in documents(root):
        if not doc.generated(root, lang):
            continue
        outputs = doc.outputs(lang)
        found[doc.source] = outputs[0]
        if doc.kind == "notebook":
            found[Path("notebooks") / doc.source.name] = outputs[1]
    return found


def relink(text: str, english: Path, copy_path: Path, targets: dict[Path, Path]) -> str:
    """``text`` with each relative link of ``english`` rewritten for a file at ``copy_path``.

    A link to a file that has a translated copy leads to the copy; any other link leads
    to the same file as before. Web links and links within the page are left alone.
    """

    def rewrite(match: re.Match) -> str:
        target = match.group(2)
        bare = target[1:-1] if target.startswith("<") else target
        if not bare or bare.startswith("#") or _SCHEME.match(bare):
            return match.group(0)
        path, hash_, anchor = bare.partition("#")
        linked = Path(os.path.normpath(english.parent / path))
        linked = targets.get(linked, linked)
        new = Path(os.path.relpath(linked, copy_path.parent)).as_posix() + hash_ + anchor
        return match.group(1) + (f"<{new}>" if target.startswith("<") else new)

    return _ATTR.sub(rewrite, _LINK.sub(rewrite, text))


# ------------------------------------------------------------------- generation

Translate = Callable[[str], str | None]


def translate_text(text: str, translate: Translate) -> str:
    """``text`` with each block replaced by ``translate(msgid)`` (the English where None)."""
    return blocks.join(blocks.split(text), lambda b: translate(b.msgid) or None)


def _note(sources: list[Path]) -> str:
    return f"Generated by `make translations` from {', '.join(map(str, sources))}: do not edit."


def _translated_notebook(
    nb: nbformat.NotebookNode, edit: Callable[[str], str], doc: Document, lang: str
) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = edit(cell.source)
    nb.metadata.pop("jupytext", None)
    nb.metadata["labsupport"] = {
        "generated_from": doc.source.as_posix(),
        "language": lang,
        "note": _note([doc.source, doc.catalogue(lang)]),
    }
    return nb


def generate(doc: Document, lang: str, translate: Translate, root: Path = ROOT) -> dict[Path, str]:
    """The text of each translated copy of ``doc`` (relative path -> file content)."""
    targets = counterparts(root, lang)
    outputs = doc.outputs(lang)
    if doc.kind == "markdown":
        return {outputs[0]: _markdown(doc, lang, translate, root, targets)}
    english = nbformat.read(root / doc.source, as_version=4)
    raw = _translated_notebook(english, lambda s: translate_text(s, translate), doc, lang)
    out = _translated_notebook(raw, lambda s: relink(s, doc.source, outputs[0], targets), doc, lang)
    # The language cell first, and what labsupport printed in the notebook's language.
    library_text = outputs_module.translator(root, lang)
    out = outputs_module.localize(out, lang, library_text, deck=doc.kind == "deck")
    result = {outputs[0]: exercises.render(out)}
    if doc.kind == "notebook":
        # The learner's copy of the translated solution, with links as the English
        # learner's copy has them, then rewritten for the translated learner's copy.
        learner = exercises.make_learner_notebook(raw)
        stub = translate(exercises.MARKDOWN_STUB) or exercises.MARKDOWN_STUB
        english_learner = Path("notebooks") / doc.source.name

        def edit(source: str) -> str:
            source = source.replace(exercises.MARKDOWN_STUB, stub)
            return relink(source, english_learner, outputs[1], targets)

        learner = _translated_notebook(learner, edit, doc, lang)
        learner = outputs_module.localize(learner, lang, library_text)
        result[outputs[1]] = exercises.render(learner)
    return result


def _markdown(
    doc: Document, lang: str, translate: Translate, root: Path, targets: dict[Path, Path]
) -> str:
    """A translated guide: its preface (links already relative to the copy), then the body."""
    out = doc.outputs(lang)[0]
    preface = root / doc.preface(lang)
    sources = [doc.preface(lang)] if preface.exists() else []
    body = ""
    if (root / doc.catalogue(lang)).exists():
        sources += [doc.source, doc.catalogue(lang)]
        english = (root / doc.source).read_text(encoding="utf-8")
        body = relink(translate_text(english, translate), doc.source, out, targets)
    parts = [f"<!-- {_note(sources)} -->\n"]
    if preface.exists():
        text = preface.read_text(encoding="utf-8")
        parts.append(text.replace(PREFACE_MARK, translated_files(root, lang, out)))
        body = re.sub(r"\A#(?!#)[^\n]*\n+", "", body)  # the preface has the title
        if body:
            parts.append("\n")
    parts.append(body)
    return "".join(parts)


def translated_files(root: Path, lang: str, here: Path) -> str:
    """A Markdown list of what is translated (linked from ``here``), then what is not yet.

    Made from the catalogues that exist, so the preface that shows it stays true: each
    notebook, deck and guide with a catalogue is listed with a link to its copy; the
    documents without one are named in a closing sentence (none when all are translated).
    """
    lines = []
    missing: dict[str, list[str]] = {"notebook": [], "deck": [], "markdown": []}

    def link(path: Path) -> str:
        return Path(os.path.relpath(path, here.parent)).as_posix()

    for doc in documents(root):
        if not (root / doc.catalogue(lang)).exists():
            missing[doc.kind].append(doc.source.stem[:2] if doc.kind != "markdown" else doc.domain)
            continue
        outputs = doc.outputs(lang)
        if doc.kind == "notebook":
            lines.append(
                f"- 笔记本 {doc.source.stem}：[练习版]({link(outputs[1])}) · "
                f"[答案版]({link(outputs[0])})"
            )
        elif doc.kind == "deck":
            lines.append(
                f"- 幻灯片 {doc.source.stem}：[{outputs[0].as_posix()}]({link(outputs[0])})"
            )
        else:
            this = "（本文件）" if outputs[0] == here else ""
            lines.append(
                f"- {_GUIDES.get(doc.domain, doc.domain)}（{doc.source.as_posix()}）："
                f"[{outputs[0].as_posix()}]({link(outputs[0])}){this}"
            )
    text = "\n".join(lines) if lines else "- （暂无）"
    left = [f"笔记本 {_numbers(missing['notebook'])}"] if missing["notebook"] else []
    left += [f"幻灯片 {_numbers(missing['deck'])}"] if missing["deck"] else []
    left += [_GUIDES.get(d, d) for d in missing["markdown"]]
    if left:
        english = link(Path("README.md"))
        text += f"\n\n尚未翻译、暂时只有英文版的：{'；'.join(left)}。见 [README.md]({english})。"
    return text


#: What the translated-files list calls each guide.
_GUIDES = {"README": "课程说明", "INSTRUCTOR": "讲师指南"}


def _numbers(numbers: list[str]) -> str:
    """'01', '02', '03', '05' -> '01–03、05' (runs of consecutive numbers joined)."""
    runs: list[list[str]] = []
    for n in numbers:
        if runs and n.isdigit() and runs[-1][-1].isdigit() and int(n) == int(runs[-1][-1]) + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return "、".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
