"""Terminology and wording checks on a catalogue's translations.

* :func:`load` reads the checked table of ``i18n/<lang>/GLOSSARY.md``: one row per term,
  English variants and accepted translations each separated by `` / `` (the first
  translation is the preferred one); ``load(path, PENDING_HEADING)`` the table of terms
  decided but only warned about until every catalogue follows them.
* :func:`term_problems`: a block whose English uses a term must use one of its
  translations. A translator who means another sense of the word says so in a translator
  comment of that entry, ``# glossary: TERM (why)``, and the term is not checked there.
* :func:`borrowed`: where a translation repeats the reference article's own wording
  (a long run of the same Chinese characters): the course corrects the article in its
  own words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from i18n.blocks import CODE, COMMENT, MATH

CHECKED_HEADING = re.compile(r"^##\s+Checked terms(?!, warnings)", re.MULTILINE)
PENDING_HEADING = re.compile(r"^##\s+Checked terms, warnings for now", re.MULTILINE)
_ROW = re.compile(r"^\|(.+)\|\s*$")
_TARGET = re.compile(r"\]\([^)]*\)")
_CJK = re.compile(r"[\u3400-\u9fff]")
#: A run this long, with at least MIN_CJK Chinese characters, counts as borrowed wording.
RUN = 14
MIN_CJK = 10


@dataclass(frozen=True)
class Term:
    """A glossary row: English variants and the translations that render them."""

    english: tuple[str, ...]
    chinese: tuple[str, ...]

    @property
    def pattern(self) -> re.Pattern:
        """A regex that finds the term (any of its spellings, plural or inflected)."""
        variants = sorted(self.english, key=len, reverse=True)
        words = "|".join(r"[-\s]?".join(map(re.escape, re.split(r"[-\s]", v))) for v in variants)
        return re.compile(rf"(?<![\w-])(?:{words})(?:s|es|ed|ing)?(?![\w-])", re.IGNORECASE)

    def used_in(self, english: str) -> bool:
        """True if ``english`` prose uses the term."""
        return bool(self.pattern.search(prose(english)))

    def rendered_in(self, translation: str) -> bool:
        """True if ``translation`` uses one of the term's Chinese renderings."""
        lowered = translation.lower()
        return any(c.lower() in lowered for c in self.chinese)


def prose(text: str) -> str:
    """``text`` without code spans, math, HTML comments and tags, and link targets."""
    text = COMMENT.sub(" ", CODE.sub(" ", text))
    text = MATH.sub(" ", _TARGET.sub("]", text))
    return re.sub(r"<[^>]+>", " ", text)


def load(path: Path, heading: re.Pattern = CHECKED_HEADING) -> list[Term]:
    """The terms of a GLOSSARY.md's table under ``heading`` ('## Checked terms')."""
    text = path.read_text(encoding="utf-8")
    match = heading.search(text)
    if match is None:
        if heading is not CHECKED_HEADING:
            return []
        raise ValueError(f"{path}: no '## Checked terms' section")
    section = text[match.end() :].split("\n## ", 1)[0]
    terms = []
    for line in section.splitlines():
        row = _ROW.match(line.strip())
        if not row:
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        if len(cells) < 2 or set(cells[0]) <= set("-: ") or cells[0].lower() == "english":
            continue
        split = [tuple(v.strip() for v in cell.split(" / ") if v.strip()) for cell in cells[:2]]
        terms.append(Term(split[0], split[1]))
    return terms


def waived(notes: str) -> set[str]:
    """The terms a translator comment exempts: lines ``glossary: TERM ...``."""
    found = set()
    for line in notes.splitlines():
        match = re.match(r"\s*glossary:\s*(.+)", line)
        if match:
            found.add(match.group(1).split("(")[0].strip().lower())
    return found


def term_problems(terms: list[Term], msgid: str, msgstr: str, notes: str = "") -> list[str]:
    """One message per glossary term that ``msgid`` uses and ``msgstr`` renders another way."""
    skip = waived(notes)
    problems = []
    for term in terms:
        if any(v.lower() in skip for v in term.english):
            continue
        if term.used_in(msgid) and not term.rendered_in(msgstr):
            wanted = " / ".join(term.chinese)
            problems.append(
                f"uses '{term.english[0]}' but the translation has none of: {wanted} "
                f"(or add a translator comment '# glossary: {term.english[0]} (why)')"
            )
    return problems


def _normal(text: str) -> str:
    return re.sub(r"\s+", "", text)


def shingles(article: str) -> set[str]:
    """Every run of RUN characters (whitespace removed) of the article."""
    flat = _normal(article)
    return {flat[i : i + RUN] for i in range(len(flat) - RUN + 1)}


def borrowed(translation: str, article_runs: set[str]) -> str | None:
    """The first run of the article's own wording in ``translation``, or None."""
    flat = _normal(prose(translation))
    for i in range(len(flat) - RUN + 1):
        run = flat[i : i + RUN]
        if len(_CJK.findall(run)) >= MIN_CJK and run in article_runs:
            return run
    return None
