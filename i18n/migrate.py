"""One-time migration of the catalogues to unwrapped msgids (issue 37), run as ``python -m i18n
migrate``.

Until issue 37 a block's msgid was its English with the source's hard line wraps, so
re-wrapping a paragraph made its entry fuzzy. Now the msgid is the block unwrapped
(:func:`i18n.blocks.unwrap`). This carries every entry of every catalogue to its new msgid:
the old msgid unwrapped is exactly what the new extraction gives for the same English, so
each translation (and its fuzzy flag, comments and ``#| msgid``, unwrapped too) lands on
the entry the next ``update`` looks for, and no entry turns fuzzy or new.

It also tidies each catalogue (:func:`i18n.catalog.tidy`: header fields filled, obsolete
``#~`` entries dropped) and replaces the long change-log comment of a header by its
summary, a ``# Translators:`` line and one ``# Reviewed:`` line (:data:`SUMMARIES`; the
change-log stays in git's history). A header whose comment is not the one a summary was
written from is left as it is, and said (summarise it by hand).

Running it again changes nothing: unwrapping is idempotent, filled fields stay, and a
header that has its ``# Translators:`` line is not touched.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

from translate.storage import po

from i18n import blocks, catalog, documents


@dataclass(frozen=True)
class Summary:
    """A catalogue's header comment, summarised."""

    translators: str  # who translated, in order
    reviewed: str  # one line: who read it a second time, what, when (or that nobody has)
    last: str  # the Last-Translator field
    old: str  # sha256 (first 12 hex) of the change-log comment this summary replaces


#: The header comments, summarised (filled from the catalogues of 2026-12-06).
SUMMARIES: dict[str, Summary] = {
    "00_welcome": Summary(
        "a helper (2026-12-02)",
        (
            "not by a second reader: the translator's own second pass (2026-12-02), every "
            "block beside the English; a native reader should still read it"
        ),
        "a course helper",
        "16b095856ab0",
    ),
    "01_primitives": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): all 104 entries, 2 changed; "
            "round 2's 6 entries by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "f0a7689fd206",
    ),
    "02_point_to_point": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 60 entries, 2 changed; round "
            "2's 10 entries by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "0aa380355412",
    ),
    "03_ring_allreduce": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 75 entries, 3 changed; round "
            "2's 1 entry by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "cb9c9a003566",
    ),
    "04_algorithms": Summary(
        "helper tr4 (2026-12-02, issue 29)",
        (
            "a second reader, not the translator (2026-12-02): 80 entries, 1 changed, and 3 "
            "entries brought up to the changed English by that reader (in-network reduction's"
            " last sentence: one reader only)"
        ),
        "helper tr4",
        "9ab300cbe125",
    ),
    "05_topology": Summary(
        "helper tr5 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 104 entries, 16 changed, 6 "
            "translated; then the translator's own reread (3 changed); round 2's 1 entry by "
            "helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "cd04417cac15",
    ),
    "06_measuring_bandwidth": Summary(
        "a helper (2026-12-02); helper fz2 (2026-12-02, after the English changed)",
        (
            "helper tr3, not the translator (2026-12-02): 94 entries, 5 changed; the next "
            "round's 14 entries by helper rv6 (2026-12-02), 1 changed"
        ),
        "helper fz2",
        "2fba1fb868ac",
    ),
    "07_overlap": Summary(
        (
            "a helper (2026-12-02); helper fz2 (2026-12-02, after the English changed; the "
            "lead: the 1F1B answer); helper zh0710 (2026-12-06)"
        ),
        (
            "helper tr3, not the translator (2026-12-02): 78 entries, 6 changed; the next "
            "round's 15 entries by helper rv6 (2026-12-02), 0 changed; the 17 entries of "
            "2026-12-06 not yet second-read"
        ),
        "helper zh0710",
        "cf8306241b3d",
    ),
    "08_scaling_compression": Summary(
        "helper tr8 (2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): all 83 entries, 6 changed; 1 "
            "entry retranslated by that reader after a merge has had one reader only"
        ),
        "helper tr8",
        "33c41779906b",
    ),
    "09_troubleshooting": Summary(
        ("helper tr9 (2026-12-02); a helper (1 entry after the English changed, 2026-12-02)"),
        (
            "a second reader, not the translator (2026-12-02): all 98 entries, 5 changed "
            "(wording; no error of meaning)"
        ),
        "helper tr9",
        "116bc1d732b3",
    ),
    "10_capstone": Summary(
        (
            "a helper (2026-12-02); helper fz3 (2026-12-02, after the English changed); "
            "helper zh0710 (2026-12-06)"
        ),
        (
            "helper tr3, not the translator (2026-12-02): 61 entries, 2 changed; the next "
            "round's 6 entries by helper rv6 (2026-12-02), 1 changed; the 8 entries of "
            "2026-12-06 not yet second-read"
        ),
        "helper zh0710",
        "133c5bb27e5b",
    ),
    "11_sharding": Summary(
        "helper nb11 (2026-12)",
        (
            "not yet by a second reader: each block reread once by the translator (helper "
            "nb11) beside the English"
        ),
        "helper nb11",
        "bedd66039cd1",
    ),
    "12_parallelism": Summary(
        "helper nb12 (2026-12)",
        (
            "not yet by a second reader: each block reread once by the translator (helper "
            "nb12) beside the English"
        ),
        "helper nb12",
        "8cb6f3611cd4",
    ),
    "INSTRUCTOR": Summary(
        (
            "a helper (2026-12-02); helper fz3 (2026-12-02, after the English changed); "
            "helper rv6 (1 entry after a merge, 2026-12-02); a helper (1 entry, 2026-12-06)"
        ),
        (
            "a second reader, not the translator (2026-12-02): all 78 entries, 2 changed; the"
            " next round's 3 entries by helper rv6 (2026-12-02), 0 changed; rv6's entry by "
            "another second reader, 1 changed; the entry of 2026-12-06 read a second time by "
            "its translator, 0 changed"
        ),
        "a course helper",
        "5c18f90de0ce",
    ),
    "README": Summary(
        "a helper (2026-12-02); helper fz3 (2026-12-02, after the English changed)",
        (
            "a second reader, not the translator (2026-12-02): all 68 entries, 2 changed; the"
            " next round's 3 entries by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz3",
        "183c12d28346",
    ),
    "slides-00_welcome": Summary(
        "a helper (2026-12-02)",
        (
            "not by a second reader: the translator's own second pass (2026-12-02), every "
            "block beside the English; a native reader should still read it"
        ),
        "a course helper",
        "b46f1fa2878e",
    ),
    "slides-01_primitives": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 28 entries, 1 changed; round "
            "2's 6 entries by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "19560fe78d58",
    ),
    "slides-02_point_to_point": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 26 entries, 0 changed; round "
            "2's 2 entries by helper rv6 (2026-12-02), 0 changed"
        ),
        "helper fz1",
        "d5f654cea472",
    ),
    "slides-03_ring_allreduce": Summary(
        "helper tr1 (2026-12-02, issue 29); helper fz1 (round 2, 2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): 27 entries, 3 changed; round "
            "2's 3 entries by helper rv6 (2026-12-02), 1 changed"
        ),
        "helper fz1",
        "e0fadf22ad02",
    ),
    "slides-04_algorithms": Summary(
        "helper tr4 (2026-12-02, issue 29)",
        "a second reader, not the translator (2026-12-02): 28 entries, 1 changed",
        "helper tr4",
        "eeb2c9903d38",
    ),
    "slides-05_topology": Summary(
        "helper tr5 (2026-12-02, issue 29)",
        (
            "a second reader, not the translator (2026-12-02): 26 entries, 3 changed; then "
            "the translator's own reread (1 changed)"
        ),
        "helper tr5",
        "b7e354f4b31b",
    ),
    "slides-06_measuring_bandwidth": Summary(
        (
            "a helper (2026-12-02); helper fz2 (2026-12-02, after the English changed; the "
            "lead: 1 entry)"
        ),
        (
            "a second reader, not the translator (2026-12-02): all 21 entries, 1 changed; the"
            " next round's 5 entries by helper rv6 (2026-12-02), 1 changed"
        ),
        "helper fz2",
        "d14645b01314",
    ),
    "slides-07_overlap": Summary(
        "helper fz1 (2026-12-02, issue 29); helper zh0710 (2026-12-06)",
        (
            "helper rv6, not the translator (2026-12-02): all 26 entries, 0 changed; the 6 "
            "entries of 2026-12-06 not yet second-read"
        ),
        "helper zh0710",
        "dbdd23572925",
    ),
    "slides-08_scaling_compression": Summary(
        "helper tr8 (2026-12-02)",
        "a second reader, not the translator (2026-12-02): all 43 entries, 1 changed",
        "helper tr8",
        "a89e069cf049",
    ),
    "slides-09_troubleshooting": Summary(
        "helper tr9 (2026-12-02)",
        (
            "a second reader, not the translator (2026-12-02): all 40 entries, 1 changed "
            "(wording; no error of meaning)"
        ),
        "helper tr9",
        "861295531364",
    ),
    "slides-10_capstone": Summary(
        (
            "a helper (2026-12-02); helper fz3 (2026-12-02, after the English changed); "
            "helper zh0710 (2026-12-06)"
        ),
        (
            "a second reader, not the translator (2026-12-02): all 33 entries, 0 changed; the"
            " next round's 3 entries by helper rv6 (2026-12-02), 0 changed; the 2 entries of "
            "2026-12-06 not yet second-read"
        ),
        "helper zh0710",
        "f6f94540d263",
    ),
    "slides-11_sharding": Summary(
        "helper nb11 (2026-12)",
        (
            "not yet by a second reader: reread once by the translator (helper nb11) beside "
            "the English"
        ),
        "helper nb11",
        "d4ac27b163d9",
    ),
    "slides-12_parallelism": Summary(
        "helper nb12 (2026-12)",
        (
            "not yet by a second reader: each block reread once by the translator (helper "
            "nb12) beside the English"
        ),
        "helper nb12",
        "5a946b61c629",
    ),
}


@dataclass
class Result:
    """What the migration did to one catalogue."""

    rewrapped: int = 0  # entries whose msgid changed
    merged: int = 0  # entries that became one with another (same unwrapped msgid)
    dropped: int = 0  # obsolete entries removed
    header: str = ""  # what happened to the header comment
    conflicts: list[str] | None = None  # merged entries whose two translations differed


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _rank(unit: po.pounit) -> int:
    """Which of two entries with one msgid to keep: translated, then fuzzy, then empty."""
    if unit.target and not unit.isfuzzy():
        return 2
    return 1 if unit.target else 0


def rewrap(store: po.pofile) -> Result:
    """Give every entry of ``store`` its unwrapped msgid (and ``#| msgid``), in place."""
    result = Result(conflicts=[])
    kept: dict[str, po.pounit] = {}
    for unit in list(store.units):
        if unit.isheader() or unit.isobsolete():
            continue
        new = blocks.unwrap(unit.source)
        previous = unit.prev_source
        if previous and blocks.unwrap(previous) != previous:
            unit.prev_source = blocks.unwrap(previous)
        if new != unit.source:
            unit.source = new
            result.rewrapped += 1
        other = kept.get(new)
        if other is None:
            kept[new] = unit
            continue
        result.merged += 1
        if _rank(unit) > _rank(other):
            unit, other = other, unit
            kept[new] = other
        if unit.target and other.target and unit.target != other.target and _rank(unit) == 2:
            result.conflicts.append(new[:60])
        for location in unit.getlocations():
            if location not in other.getlocations():
                other.addlocation(location)
        store.removeunit(unit)
    return result


def summarise(store: po.pofile, domain: str) -> tuple[str, str | None]:
    """Replace the header's change-log by its summary; (what happened, Last-Translator)."""
    header = store.header()
    if header is None:
        return "no header", None
    comment = header.getnotes("translator")
    lines = comment.split("\n") if comment else []
    if any(line.startswith("Translators:") for line in lines):
        return "summarised already", None
    summary = SUMMARIES.get(domain)
    if summary is None:
        return "no summary for this catalogue: header comment kept", None
    # The summary was written from the first N lines; lines added since are kept below it.
    cut = next(
        (n for n in range(len(lines), 0, -1) if _digest("\n".join(lines[:n])) == summary.old),
        None,
    )
    if cut is None:
        return "header comment changed since it was summarised: kept, summarise it by hand", None
    title = [lines[0]] if lines and lines[0].startswith("Chinese") else []
    new = [*title, f"Translators: {summary.translators}", f"Reviewed: {summary.reviewed}"]
    new += lines[cut:]
    header.removenotes()
    header.addnote("\n".join(new), origin="translator")
    extra = f", {len(lines) - cut} later line(s) kept below it: fold them in" if lines[cut:] else ""
    return f"summarised ({len(lines)} comment lines -> {len(new)}){extra}", summary.last


def _last_commit_date(path: Path) -> str | None:
    """When git last committed ``path``, as a PO date (``2026-12-06 21:30+0000``)."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ci", "--", path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    if not out:
        return None
    day, time, zone = out.split()
    return f"{day} {time[:5]}{zone}"


def migrate_file(path: Path, domain: str, lang: str) -> Result:
    """Migrate the catalogue at ``path`` in place (written only when it changes)."""
    data = path.read_bytes()
    store = po.pofile(io.BytesIO(data))
    result = rewrap(store)
    result.header, last = summarise(store, domain)
    result.dropped = catalog.tidy(store, lang, _last_commit_date(path), last)
    new = catalog.serialize(store)
    if new != data:
        path.write_bytes(new)
    return result


def counts(root: Path, lang: str) -> tuple[int, int]:
    """(translated, fuzzy) live entries over every catalogue of ``lang``."""
    done = fuzzy = 0
    for doc in documents.documents(root):
        path = root / doc.catalogue(lang)
        if path.exists():
            entries = catalog.Catalogue(path).entries.values()
            done += sum(e.done for e in entries)
            fuzzy += sum(e.fuzzy for e in entries)
    return done, fuzzy


def migrate(root: Path, lang: str) -> tuple[int, int, int]:
    """Migrate every catalogue of ``lang``, printing what each one got.

    Returns (entries whose msgid changed, entries merged, obsolete entries dropped).
    """
    total = [0, 0, 0]
    for doc in documents.documents(root):
        path = root / doc.catalogue(lang)
        if not path.exists():
            continue
        result = migrate_file(path, doc.domain, lang)
        total = [
            total[0] + result.rewrapped,
            total[1] + result.merged,
            total[2] + result.dropped,
        ]
        print(
            f"{doc.catalogue(lang)}: {result.rewrapped} msgid(s) unwrapped, "
            f"{result.merged} merged, {result.dropped} obsolete dropped; header {result.header}"
        )
        for conflict in result.conflicts or []:
            print(f"  warning: two translations of {conflict!r}: the first kept")
    return total[0], total[1], total[2]
