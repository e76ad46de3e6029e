"""What ``python -m i18n check`` (and so ``make test``) requires of the translations.

For every document whose catalogue exists (see :mod:`i18n.documents`):

* the catalogue translates every block of the current English, none of them fuzzy;
* each translation keeps what must not change: code spans, math, link targets, HTML tags
  and comments, and every number of the English; a code span may instead be its zh image
  under :data:`PATH_MAP` (``notebooks/`` -> ``notebooks/zh_CN/``), and no other span is added;
* no soft line break between two Chinese characters (a reader would see a stray space);
* glossary terms are translated as the glossary says (:mod:`i18n.glossary`; the terms of
  its warn-only table are reported by :func:`term_warnings`, not failed), and no
  translation repeats the reference article's wording (when the article is at hand);
* every generated copy is exactly what ``make translations`` writes now (a stale or
  hand-edited copy fails), with the English code cells, cell ids and outputs;
* every relative link of a generated copy leads to a file (and heading) that exists.

Also: no generated file is left without its document, and an English guide links to its
translation once there is one.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import nbformat
from labkit import exercises

from i18n import blocks, catalog, documents, glossary, library, outputs
from i18n.blocks import CODE, COMMENT, MATH, TEXT_IN_MATH

ARTICLE = Path("shared") / "reference" / "hccl-article-zh.txt"
_LINK_TARGET = re.compile(r"(?<!!)\[[^\]]*\]\(<?([^)\s>]+)>?\)|\b(?:href|src)=[\"']([^\"']+)")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SOFT_BREAK = re.compile(r"[\u3400-\u9fff，。；：、）]\n[\u3400-\u9fff（]")
SHOW = 5  # entries listed per kind of problem and catalogue


_LINE_END = re.compile(r"[ \t]*\n[ \t]*")


def _math(text: str) -> list[str]:
    """Math spans, with the words of \\text{...} left out (a translation may translate them),
    a line break inside one read as a space (the msgid has its lines joined)."""
    return [_LINE_END.sub(" ", TEXT_IN_MATH.sub(r"\\text{}", m)) for m in MATH.findall(text)]


def _numbers(text: str) -> list[str]:
    text = COMMENT.sub(" ", CODE.sub(" ", MATH.sub(" ", text)))
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return _NUMBER.findall(text)


def _code_spans(text: str) -> list[str]:
    """The code spans of ``text``, a line break inside one read as a space (as Markdown does)."""
    return [_LINE_END.sub(" ", m.group(0)) for m in CODE.finditer(text)]


#: Where a zh entry may send its reader instead of the English page: a path (at the start
#: of a code span, or after a space or ``=``) that begins with a key may begin with its
#: value instead, and ``make lab`` may gain ``COURSE_LANG=zh_CN``. Only these: the copies
#: `make translations` and `make slides` write (i18n/README.md's table).
PATH_MAP = {
    "notebooks/": "notebooks/zh_CN/",
    "slides/_build/": "slides/_build/zh_CN/",
    "slides/INSTRUCTOR.md": "slides/INSTRUCTOR.zh-CN.md",
    "INSTRUCTOR.md": "INSTRUCTOR.zh-CN.md",
    "README.md": "README.zh-CN.md",
    "slides/": "slides/zh_CN/",
}
_MAPPED = re.compile(
    r"(?<![\w./-])(" + "|".join(map(re.escape, sorted(PATH_MAP, key=len, reverse=True))) + ")"
)
_MAKE_LAB = re.compile(r"^(`+)(make lab\b(?:(?!COURSE_LANG).)*?)(\1)$", re.DOTALL)


def localized(span: str) -> str:
    """The zh image of an English code span under :data:`PATH_MAP` (itself if none)."""
    span = _MAPPED.sub(lambda m: PATH_MAP[m.group(1)], span)
    return _MAKE_LAB.sub(r"\1\2 COURSE_LANG=zh_CN\3", span)


def code_problems(msgid: str, msgstr: str) -> list[str]:
    """Code spans of ``msgid`` missing from ``msgstr`` (neither kept nor mapped), and spans of
    ``msgstr`` that are neither an English span nor its image under :data:`PATH_MAP`."""
    english, left = _code_spans(msgid), Counter(_code_spans(msgstr))
    missing = []
    for span in english:
        found = next((s for s in (span, localized(span)) if left[s] > 0), None)
        if found is None:
            missing.append(span)
        else:
            left[found] -= 1
    allowed = set(english) | {localized(s) for s in english}
    problems = []
    if missing:
        problems.append(f"the translation lacks the code {', '.join(sorted(set(missing)))[:120]}")
    extra = sorted({s for s in _code_spans(msgstr) if s not in allowed})
    if extra:
        problems.append(
            f"the translation has the code {', '.join(extra)[:120]}, which is neither the "
            "English's nor its zh path (i18n.checks.PATH_MAP)"
        )
    return problems


KEPT = {
    "math": _math,
    "link target": lambda t: [a or b for a, b in _LINK_TARGET.findall(t)],
    "HTML tag or comment": lambda t: _TAG.findall(t) + COMMENT.findall(t),
    "number": _numbers,
}


def kept_problems(msgid: str, msgstr: str) -> list[str]:
    """What of ``msgid`` that must be kept is missing from ``msgstr``."""
    problems = code_problems(msgid, msgstr)
    for what, find in KEPT.items():
        missing = Counter(find(msgid)) - Counter(find(msgstr))
        if missing:
            shown = ", ".join(sorted(missing))[:120]
            problems.append(f"the translation lacks the {what} {shown}")
    if _SOFT_BREAK.search(msgstr):
        problems.append("a line break between Chinese characters shows as a space: join the lines")
    english, chinese = _emphasis(msgid), _emphasis(msgstr)
    # Chinese emphasis is bold: an English *italic* may be **bold** in the translation.
    if sum(english.values()) != sum(chinese.values()) or chinese["em_open"] > english["em_open"]:
        problems.append(
            "its *emphasis* or **bold** does not render as in the English (CommonMark does not "
            "close `**` after punctuation before a Chinese character: end the emphasis at a "
            "character, or put a space after it)"
        )
    if _CHINESE_ITALIC.search(msgstr):
        problems.append("Chinese emphasis is bold, not italic: write **…** for *…*")
    return problems


_CHINESE_ITALIC = re.compile(r"(?<![*A-Za-z0-9_])\*(?=[\u4e00-\u9fff])[^*\n]+\*(?!\*)")


def _emphasis(text: str) -> Counter:
    """How many bold and italic spans Markdown makes of ``text``."""
    tokens = [t for block in blocks.parser().parse(text) for t in (block.children or [])]
    return Counter(t.type for t in tokens if t.type in ("strong_open", "em_open"))


def _short(msgid: str) -> str:
    first = msgid.strip().splitlines()[0] if msgid.strip() else msgid
    return repr(first[:50] + ("…" if len(first) > 50 or "\n" in msgid.strip() else ""))


def catalogue_problems(
    doc: documents.Document,
    root: Path,
    lang: str,
    terms: list[glossary.Term],
    article_runs: set[str],
) -> list[str]:
    """Problems of one catalogue: completeness, kept tokens, glossary, borrowed wording."""
    path = doc.catalogue(lang)
    cat = catalog.Catalogue(root / path)
    entries = catalog.extract(doc, root)
    problems: list[str] = []
    for what, found in catalog.unfinished(cat, [e.msgid for e in entries]):
        if found:
            listed = "; ".join(_short(m) for m in found[:SHOW])
            problems.append(
                f"{path}: {len(found)} block(s) of {doc.source} {what} ({listed}): run "
                "`make translations`, then translate them (and remove each 'fuzzy' flag)"
            )
    for entry in entries:
        translated = cat.entries.get(entry.msgid)
        if translated is None or not translated.done:
            continue
        notes = translated.notes
        found = kept_problems(entry.msgid, translated.msgstr)
        found += glossary.term_problems(terms, entry.msgid, translated.msgstr, notes)
        run = glossary.borrowed(translated.msgstr, article_runs) if article_runs else None
        if run:
            found.append(f"repeats the reference article's wording ({run!r}): use the course's own")
        problems += [f"{path}: {_short(entry.msgid)}: {p}" for p in found]
    return problems


def _markdown_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def anchor(heading: str) -> str:
    """The anchor a code host gives a heading (as tests/course/test_links.py computes it)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def link_problems(path: Path, root: Path) -> list[str]:
    """Relative links of the file at ``path`` that lead nowhere in the repository."""
    problems = []
    for a, b in _LINK_TARGET.findall(_markdown_of(path)):
        target = a or b
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        file_part, _, hashed = target.partition("#")
        linked = Path(os.path.normpath(path.parent / file_part))
        where = path.relative_to(root)
        if not linked.is_relative_to(root) or not linked.is_file():
            problems.append(f"{where}: the link {target} leads to no file of the repository")
        elif hashed and linked.suffix == ".md":
            headings = re.findall(r"^#+\s+(.*)$", _markdown_of(linked), flags=re.MULTILINE)
            if hashed not in {anchor(h) for h in headings}:
                problems.append(f"{where}: the link {target}: {linked.name} has no such heading")
    return problems


def copy_problems(
    en: nbformat.NotebookNode, translated: Path, where: Path, learner: bool
) -> list[str]:
    """Where a translated notebook's code cells, ids or outputs differ from the English."""
    zh = nbformat.read(translated, as_version=4)
    if [c.cell_type for c in en.cells] != [c.cell_type for c in zh.cells]:
        return [f"{where}: its cells are not those of the English"]
    problems = []
    for index, (a, b) in enumerate(zip(en.cells, zh.cells, strict=True)):
        if a.get("id") != b.get("id"):
            problems.append(f"{where}: cell {index} has id {b.get('id')}, not {a.get('id')}")
        if a.cell_type == "code" and a.source != b.source:
            problems.append(f"{where}: code cell {index} differs from the English")
        if a.cell_type == "code" and not learner and a.outputs != b.outputs:
            problems.append(f"{where}: code cell {index} does not have the English outputs")
    return problems


def find_article(root: Path) -> Path | None:
    """The reference article (kept beside the repository, not in it), if it is at hand."""
    if os.environ.get("I18N_ARTICLE"):
        return Path(os.environ["I18N_ARTICLE"])
    for folder in [root, *root.parents]:
        if (folder / ARTICLE).is_file():
            return folder / ARTICLE
    return None


def term_warnings(root: Path, lang: str) -> list[str]:
    """Entries that do not follow a term of the glossary's warn-only table yet."""
    pending = glossary.load(root / "i18n" / lang / "GLOSSARY.md", glossary.PENDING_HEADING)
    warnings: list[str] = []
    for doc in documents.documents(root):
        path = doc.catalogue(lang)
        if not pending or not (root / path).exists():
            continue
        cat = catalog.Catalogue(root / path)
        for entry in catalog.extract(doc, root):
            done = cat.entries.get(entry.msgid)
            if done is not None and done.done:
                found = glossary.term_problems(pending, entry.msgid, done.msgstr, done.notes)
                warnings += [f"{path}: {_short(entry.msgid)}: {p}" for p in found]
    return warnings


def check(root: Path, lang: str, article: Path | None = None) -> list[str]:
    """Every problem of the ``lang`` translations of the repository at ``root``."""
    problems: list[str] = []
    terms = glossary.load(root / "i18n" / lang / "GLOSSARY.md")
    runs = glossary.shingles(article.read_text(encoding="utf-8")) if article else set()
    expected: set[Path] = set()
    for doc in documents.documents(root):
        if not doc.generated(root, lang):
            continue
        cat = catalog.Catalogue(root / doc.catalogue(lang))
        if (root / doc.catalogue(lang)).exists():
            problems += catalogue_problems(doc, root, lang, terms, runs)
        for path, text in documents.generate(doc, lang, cat.translate, root).items():
            expected.add(path)
            target = root / path
            if not target.exists():
                problems.append(f"{path} is missing: run `make translations`")
                continue
            if target.read_text(encoding="utf-8") != text:
                problems.append(f"{path} is stale or was edited by hand: run `make translations`")
            if path.suffix == ".ipynb":
                is_learner = doc.kind == "notebook" and path == doc.outputs(lang)[1]
                english = nbformat.read(root / doc.source, as_version=4)
                if is_learner:
                    english = exercises.make_learner_notebook(english)
                # ... with the language cell, and labsupport's own lines translated
                english = outputs.localize(
                    english, lang, outputs.translator(root, lang), deck=doc.kind == "deck"
                )
                problems += copy_problems(english, target, path, is_learner)
            problems += link_problems(target, root)
        if doc.kind == "markdown":
            link = doc.outputs(lang)[0].name
            if link not in (root / doc.source).read_text(encoding="utf-8"):
                problems.append(f"{doc.source} does not link to its translation {link}")
    for path in generated_files(root, lang):
        if path not in expected:
            problems.append(f"{path} has no catalogue or source: run `make translations`")
    problems += library.problems(root, lang, terms)  # labsupport's own messages
    return problems


def generated_files(root: Path, lang: str) -> list[Path]:
    """The translated copies present on disk (relative paths)."""
    found = [
        *(root / "notebooks" / lang).rglob("*.ipynb"),
        *(root / "slides" / lang).glob("*.ipynb"),
        *root.glob(f"*.{documents.SUFFIX[lang]}.md"),
        *(root / "slides").glob(f"*.{documents.SUFFIX[lang]}.md"),
    ]
    return sorted(p.relative_to(root) for p in found if ".ipynb_checkpoints" not in p.parts)
