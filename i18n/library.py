"""The library's own catalogue: what ``labsupport`` says to a learner (``labsupport.po``).

The notebooks' catalogues translate Markdown blocks; this one translates the messages of
the Python code, the graders' PASS/FAIL lines and hints, the launcher's error summaries,
``doctor()``'s report and the widgets' labels (see :mod:`labsupport.runtime.language`).

* :func:`extract` finds every ``_("...")`` and ``N_("...")`` with a string literal in
  ``labsupport/**/*.py`` and ``kit/labkit/**/*.py`` (with :mod:`ast`): its location is
  ``path:line``, and a ``# translators: ...`` comment right above the call becomes the
  entry's extracted comment.
* :func:`update` writes the template ``i18n/templates/labsupport.pot``, merges it into
  ``i18n/<lang>/LC_MESSAGES/labsupport.po`` the way the other catalogues are merged
  (unchanged messages keep their translation, changed ones turn fuzzy), and compiles
  ``labsupport/runtime/locale/<lang>/LC_MESSAGES/labsupport.mo`` (committed, shipped
  with the package).
* :func:`problems` is what ``python -m i18n check`` requires: every message translated and
  none fuzzy, each translation with the placeholders of its English (``{name}``,
  ``{x:g}``), the glossary's terms, and a compiled catalogue that is not stale.
* :func:`fill` puts translations from a JSON file ``{msgid: msgstr}`` into the catalogue.
"""

from __future__ import annotations

import ast
import io
import json
import re
import string
import tokenize
from collections import Counter
from pathlib import Path

from babel.messages import mofile, pofile
from translate.storage import po

from i18n import catalog, glossary

DOMAIN = "labsupport"
#: Where the messages are looked for (relative to the repository root).
SOURCES = ("labsupport", "kit/labkit")
#: The function names that mark a message.
MARKERS = ("_", "N_")
_FIELDS = re.compile(r"\{[^{}]*\}")
_TRANSLATORS = re.compile(r"#\s*translators?:\s*(.*)", re.IGNORECASE)


def catalogue_path(lang: str) -> Path:
    """The translators' catalogue of the library in ``lang``."""
    return Path("i18n") / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def template_path() -> Path:
    """The library's template (written by ``python -m i18n update``, not committed)."""
    return Path("i18n") / "templates" / f"{DOMAIN}.pot"


def compiled_path(lang: str) -> Path:
    """The compiled catalogue the library reads (committed, package data)."""
    return Path("labsupport") / "runtime" / "locale" / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"


# ------------------------------------------------------------------- extraction


def _comments(source: str) -> dict[int, str]:
    """Line number -> the text of a ``# translators:`` comment on that line."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            match = _TRANSLATORS.match(token.string)
            if match:
                found[token.start[0]] = match.group(1).strip()
    return found


def marked_calls(tree: ast.AST) -> list[ast.Call]:
    """Every call ``_(...)`` or ``N_(...)`` in ``tree``."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in MARKERS
    ]


def messages_of(path: Path, relative: str) -> list[tuple[str, str, str]]:
    """(msgid, location, translator comment) of each message marked in one file."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    comments = _comments(source)
    found = []
    for call in sorted(marked_calls(tree), key=lambda c: (c.lineno, c.col_offset)):
        if not call.args or not isinstance(call.args[0], ast.Constant):
            continue
        if not isinstance(call.args[0].value, str) or not call.args[0].value:
            continue
        notes = []
        line = call.lineno - 1
        while line in comments:  # consecutive comment lines right above the call
            notes.insert(0, comments[line])
            line -= 1
        found.append((call.args[0].value, f"{relative}:{call.lineno}", " ".join(notes)))
    return found


def extract(root: Path) -> list[catalog.Entry]:
    """One entry per distinct message of the library, in the order the files list them."""
    entries: dict[str, catalog.Entry] = {}
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            for msgid, location, note in messages_of(path, relative):
                entry = entries.setdefault(msgid, catalog.Entry(msgid))
                entry.locations.append(location)
                if note and note not in entry.notes:
                    entry.notes = f"{entry.notes}\n{note}".strip()
    return list(entries.values())


def placeholders(text: str) -> Counter:
    """The ``{...}`` fields of a format string, as written (``{name}``, ``{x:g}``)."""
    found: Counter = Counter()
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return Counter({"<not a valid format string>": 1})
    for _, name, spec, conversion in parsed:
        if name is not None:
            found[
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            ] += 1
    return found


def template(root: Path) -> po.pofile:
    """The .pot store of the library's messages."""
    store = po.pofile()
    store.updateheader(add=True, **catalog.HEADER)
    for entry in extract(root):
        unit = store.UnitClass(entry.msgid)
        for location in entry.locations:
            unit.addlocation(location)
        if entry.notes:
            unit.addnote(entry.notes, origin="developer")
        if placeholders(entry.msgid):
            unit.settypecomment("python-brace-format")
        store.addunit(unit)
    return store


# ------------------------------------------------------------------- compiling


def compile_catalogue(po_bytes: bytes) -> bytes:
    """The .mo bytes of a .po catalogue (fuzzy and untranslated entries left out)."""
    cat = pofile.read_po(io.BytesIO(po_bytes))
    cat.revision_date = cat.creation_date  # the .mo depends on the messages only
    out = io.BytesIO()
    mofile.write_mo(out, cat, use_fuzzy=False)
    return out.getvalue()


def update(root: Path, lang: str) -> list[str]:
    """Template, merged catalogue (started if missing) and compiled catalogue; what changed."""
    changed: list[str] = []
    if not extract(root) and not (root / catalogue_path(lang)).exists():
        return changed  # a repository without the library
    pot = template(root)
    pot_bytes = catalog.serialize(pot)
    pot_path = root / template_path()
    if not (pot_path.exists() and catalog.same_messages(pot_path.read_bytes(), pot_bytes)):
        catalog.write(pot_path, pot_bytes)
    po_path = root / catalogue_path(lang)
    if not po_path.exists():
        catalog.write(po_path, catalog.new_catalogue(pot, lang))
        changed.append(f"started {catalogue_path(lang)}")
    else:
        merged = catalog.merge(pot, po_path, lang)
        if not catalog.same_messages(merged, po_path.read_bytes()):
            catalog.write(po_path, merged)
            changed.append(f"updated {catalogue_path(lang)}")
    if catalog.write(root / compiled_path(lang), compile_catalogue(po_path.read_bytes())):
        changed.append(f"wrote {compiled_path(lang)}")
    return changed


def coverage(root: Path, lang: str) -> catalog.Coverage:
    """How much of the library's messages the catalogue translates."""
    cat = catalog.Catalogue(root / catalogue_path(lang))
    entries = extract(root)
    done = [e for e in entries if cat.translate(e.msgid) is not None]
    fuzzy = [e for e in entries if e.msgid in cat.entries and cat.entries[e.msgid].fuzzy]
    words = sum(len(e.msgid.split()) for e in entries if cat.translate(e.msgid) is None)
    return catalog.Coverage(len(entries), len(done), len(fuzzy), words)


# ------------------------------------------------------------------- checking


def _leading_space_lost(msgid: str, msgstr: str) -> bool:
    """An indent (two spaces or more) is kept; the one space that parts an English clause from
    what precedes it may go where the translation opens with full-width punctuation (（ ，)."""
    indent = len(msgid) - len(msgid.lstrip(" "))
    kept = len(msgstr) - len(msgstr.lstrip(" "))
    if indent == 1 and kept == 0 and msgstr[:1] in "（，：；":
        return False
    return kept != indent


def entry_problems(msgid: str, msgstr: str, notes: str, terms: list[glossary.Term]) -> list[str]:
    """What is wrong with one translated message: placeholders, glossary terms."""
    problems = []
    want, have = placeholders(msgid), placeholders(msgstr)
    if want != have:
        lost = ", ".join(sorted((want - have).elements())) or "none"
        extra = ", ".join(sorted((have - want).elements())) or "none"
        problems.append(
            f"its placeholders differ from the English's (missing: {lost}; extra: {extra})"
        )
    if _leading_space_lost(msgid, msgstr) or msgid.endswith("\n") != msgstr.endswith("\n"):
        problems.append("keep the English's leading spaces and final line break")
    # Placeholders are names, not words: "{device}" does not use the term "device".
    bare = _FIELDS.sub(" ", msgid), _FIELDS.sub(" ", msgstr)
    problems += glossary.term_problems(terms, *bare, notes)
    return problems


def problems(root: Path, lang: str, terms: list[glossary.Term]) -> list[str]:
    """Every problem of the library's catalogue in ``lang`` (empty when all is well)."""
    path = catalogue_path(lang)
    entries = extract(root)
    if not (root / path).exists():
        if not entries:
            return []  # nothing to translate (a repository without the library)
        return [f"{path} is missing: run `python -m i18n update`, then translate it"]
    cat = catalog.Catalogue(root / path)
    found: list[str] = []
    for what, listed in catalog.unfinished(cat, [e.msgid for e in entries]):
        if listed:
            shown = "; ".join(repr(m[:50]) for m in listed[:5])
            found.append(
                f"{path}: {len(listed)} message(s) of labsupport {what} ({shown}): run "
                "`python -m i18n update`, then translate them (and remove each 'fuzzy' flag)"
            )
    for entry in entries:
        done = cat.entries.get(entry.msgid)
        if done is None or not done.done:
            continue
        found += [
            f"{path}: {entry.msgid[:50]!r}: {p}"
            for p in entry_problems(entry.msgid, done.msgstr, done.notes, terms)
        ]
    compiled = root / compiled_path(lang)
    if not compiled.exists() or compiled.read_bytes() != compile_catalogue(
        (root / path).read_bytes()
    ):
        found.append(f"{compiled_path(lang)} is stale or missing: run `python -m i18n update`")
    return found


# ------------------------------------------------------------------- filling


def fill(root: Path, lang: str, translations: dict[str, str]) -> tuple[int, list[str]]:
    """Put ``translations`` ({msgid: msgstr}) into the catalogue (clearing their fuzzy flag).

    Returns how many entries changed and the msgids the catalogue does not have (run
    ``python -m i18n update`` first, after the modules that define them are merged).
    """
    path = root / catalogue_path(lang)
    store = po.pofile.parsefile(str(path))
    units = {u.source: u for u in store.units if not u.isheader() and not u.isobsolete()}
    changed, unknown = 0, []
    for msgid, msgstr in translations.items():
        unit = units.get(msgid)
        if unit is None:
            unknown.append(msgid)
            continue
        if unit.target != msgstr or unit.isfuzzy():
            unit.target = msgstr
            unit.markfuzzy(False)
            if hasattr(unit, "prev_msgid"):
                unit.prev_msgid = []
            changed += 1
    path.write_bytes(catalog.serialize(store))
    catalog.write(root / compiled_path(lang), compile_catalogue(path.read_bytes()))
    return changed, unknown


def load_json(path: Path) -> dict[str, str]:
    """A JSON file of translations: one object ``{msgid: msgstr}``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{path}: expected one JSON object of strings, {{msgid: msgstr}}")
    return data
