"""Gettext catalogues: a template (.pot) per document, and the translators' .po files.

* :func:`template` extracts one entry per Markdown block of a document (identical blocks
  share one entry), its msgid the block without the English's hard wraps
  (:func:`i18n.blocks.unwrap`), each with where it is (``#: notebook.ipynb:CELL`` for the
  notebook's CELL-th cell, ``#: guide.md:LINE`` for a guide) and what kind of block it is.
* :func:`merge` brings a catalogue in step with a new template the way gettext's
  ``msgmerge`` does, with translate-toolkit's ``pot2po``: an unchanged block keeps its
  translation; a changed one gets the old translation of the nearest old block marked
  ``fuzzy`` (with the old English as ``#| msgid``) for the translator to revise; a block
  that is gone is dropped (its translation stays in git's history, not as ``#~``).
* :func:`tidy` fills a catalogue's header and drops its obsolete entries (any catalogue).
* :class:`Catalogue` reads a .po file: which blocks are translated, which are fuzzy.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from translate.convert import pot2po
from translate.storage import po

from i18n import blocks, documents

#: What a translator is told about each kind of block (an extracted ``#.`` comment).
HINTS = {
    "heading": "heading (the # marks are added back)",
    "list item": "one list item (the marker and indent are added back)",
    "blockquote": "a quoted box (the > marks are added back)",
    "table": "a whole table: keep every | and the --- row",
    "details": "a folded answer: keep <details>, <summary> and </details>",
    "html": "an HTML block: keep the tags",
    "paragraph": "paragraph",
}
HEADER = {
    "Project-Id-Version": "collective-communication-course",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "MIME-Version": "1.0",
}
#: Where translators and readers report a wrong English or Chinese message (the course
#: repository's issues; OWNER/REPOSITORY as in site/README.md until the address is known:
#: change it here, then `python -m i18n migrate` rewrites every header).
ISSUES = "https://github.com/OWNER/REPOSITORY/issues"
#: Each language's team (the Language-Team field) and its plural rule.
TEAMS = {"zh_CN": ("Chinese (simplified)", "nplurals=1; plural=0;")}
#: The values ``msginit`` and translate-toolkit leave for a person to fill in.
PLACEHOLDERS = ("", "YEAR-MO-DA HO:MI+ZONE", "FULL NAME <EMAIL@ADDRESS>", "LANGUAGE <LL@li.org>")


@dataclass
class Entry:
    """One message of a catalogue."""

    msgid: str
    msgstr: str = ""
    fuzzy: bool = False
    locations: list[str] = field(default_factory=list)
    notes: str = ""  # the translator's comments (``# ...`` lines)

    @property
    def done(self) -> bool:
        """Translated and not fuzzy: the generated copy uses it."""
        return bool(self.msgstr) and not self.fuzzy


class Catalogue:
    """The live (not obsolete) entries of a .po file, by msgid."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        if path is not None and path.exists():
            store = po.pofile.parsefile(str(path))
            for unit in store.units:
                if unit.isheader() or unit.isobsolete() or not unit.source:
                    continue
                self.entries[unit.source] = Entry(
                    unit.source,
                    unit.target or "",
                    unit.isfuzzy(),
                    unit.getlocations(),
                    unit.getnotes("translator"),
                )

    def translate(self, msgid: str) -> str | None:
        """The translation of ``msgid``, or None when it is missing, empty or fuzzy."""
        entry = self.entries.get(msgid)
        return entry.msgstr if entry is not None and entry.done else None


def extract(doc: documents.Document, root: Path) -> list[Entry]:
    """One entry per distinct block of ``doc``, in order of first appearance.

    Its locations: ``path:CELL`` (a notebook's CELL-th cell, counting from 1) or, for a
    guide, ``path:LINE`` (the line its block starts on).
    """
    found: dict[str, Entry] = {}
    kinds: dict[str, str] = {}
    for location, text in documents.texts(doc, root):
        if location.endswith(":stub"):  # one entry, whatever Markdown makes of it
            found_blocks = [blocks.Block("stub", text)]
        else:
            found_blocks = blocks.blocks(text)
        for block in found_blocks:
            entry = found.setdefault(block.msgid, Entry(block.msgid))
            where = f"{doc.source}:{block.line + 1}" if doc.kind == "markdown" else location
            entry.locations.append(where)
            kinds.setdefault(block.msgid, block.kind)
    for msgid, entry in found.items():
        entry.notes = HINTS.get(kinds[msgid], "shown in a learner's copy in place of an answer")
    return list(found.values())


def template(doc: documents.Document, root: Path) -> po.pofile:
    """The .pot store of ``doc``: every block as an untranslated entry."""
    store = po.pofile()
    store.updateheader(add=True, **HEADER)
    for entry in extract(doc, root):
        unit = store.UnitClass(entry.msgid)
        for location in entry.locations:
            unit.addlocation(location)
        unit.addnote(entry.notes, origin="developer")
        store.addunit(unit)
    return store


def write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` (its folder made) unless it already holds it; True if written."""
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def unfinished(cat: Catalogue, msgids: list[str]) -> list[tuple[str, list[str]]]:
    """Which of ``msgids`` ``cat`` lacks, holds fuzzy, or holds untranslated, each named."""
    entries = cat.entries
    return [
        ("not in the catalogue", [m for m in msgids if m not in entries]),
        ("fuzzy", [m for m in msgids if m in entries and entries[m].fuzzy]),
        ("untranslated", [m for m in msgids if m in entries and not entries[m].msgstr]),
    ]


def serialize(store: po.pofile) -> bytes:
    """The catalogue as the bytes of its .po file."""
    out = io.BytesIO()
    store.serialize(out)
    return out.getvalue()


def merge(pot: po.pofile, po_path: Path, lang: str) -> bytes:
    """The catalogue at ``po_path`` brought in step with ``pot`` (pot2po's fuzzy matching),
    its header filled and what is obsolete dropped (:func:`tidy`)."""
    old = po.pofile.parsefile(str(po_path))
    # pot2po parses its input again: hand it a copy of the template.
    fresh = po.pofile(io.BytesIO(serialize(pot)))
    merged = pot2po.convert_stores(fresh, old)
    tidy(merged, lang)
    return serialize(merged)


def new_catalogue(pot: po.pofile, lang: str) -> bytes:
    """A new, empty catalogue for ``lang`` from a template."""
    store = po.pofile(io.BytesIO(serialize(pot)))
    tidy(store, lang)
    return serialize(store)


def tidy(
    store: po.pofile, lang: str, revised: str | None = None, translator: str | None = None
) -> int:
    """Fill the header of a catalogue in ``lang`` and drop its obsolete ``#~`` entries.

    The project's fields (MIME, Content-Type, Language, Plural-Forms, Language-Team,
    Report-Msgid-Bugs-To: :data:`ISSUES`) are set; the fields a person fills are set only
    where they still hold a placeholder: PO-Revision-Date (``revised``, e.g.
    ``2026-12-06 22:00+0000``) and Last-Translator (``translator``), when given. Returns
    how many entries were dropped.
    """
    team, plurals = TEAMS.get(lang, (lang, "nplurals=2; plural=(n != 1);"))
    fields = store.parseheader()
    wanted = dict(HEADER, Language=lang, Plural_Forms=plurals)
    wanted.update({"Report-Msgid-Bugs-To": ISSUES, "Language-Team": f"{team} <{ISSUES}>"})
    for key, value in (
        ("PO-Revision-Date", revised),
        ("Last-Translator", translator),
    ):
        if value and fields.get(key, "") in PLACEHOLDERS:
            wanted[key.replace("-", "_")] = value
    store.updateheader(add=True, **wanted)
    obsolete = [unit for unit in store.units if unit.isobsolete()]
    for unit in obsolete:
        store.removeunit(unit)
    return len(obsolete)


def _units(data: bytes) -> list[tuple]:
    """What a catalogue says, without the header's dates (to tell a real change)."""
    store = po.pofile(io.BytesIO(data))
    return [
        (u.source, u.target, u.isfuzzy(), u.isobsolete(), tuple(u.getlocations()), u.getnotes())
        for u in store.units
        if not u.isheader()
    ]


def same_messages(a: bytes, b: bytes) -> bool:
    """True if two catalogues hold the same entries (headers aside)."""
    return _units(a) == _units(b)


@dataclass(frozen=True)
class Coverage:
    """How much of a document its catalogue translates."""

    total: int
    done: int
    fuzzy: int
    words: int  # English words in the blocks still to translate (or revise)

    @property
    def percent(self) -> float:
        """Translated share of the blocks, in percent."""
        return 100.0 * self.done / self.total if self.total else 100.0


def coverage(doc: documents.Document, root: Path, catalogue: Catalogue) -> Coverage:
    """How much of ``doc`` the catalogue translates."""
    entries = extract(doc, root)
    done = [e for e in entries if catalogue.translate(e.msgid) is not None]
    fuzzy = [
        e for e in entries if e.msgid in catalogue.entries and catalogue.entries[e.msgid].fuzzy
    ]
    todo = [e for e in entries if catalogue.translate(e.msgid) is None]
    words = sum(len(e.msgid.split()) for e in todo)
    return Coverage(len(entries), len(done), len(fuzzy), words)
