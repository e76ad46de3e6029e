"""Command line: ``python -m i18n update | check | init DOMAIN... | migrate`` (from the root).

``update`` (``make translations``)
    writes a template per document (``i18n/templates/*.pot``, not committed), brings every
    existing catalogue in step with it (unchanged blocks keep their translation, changed
    ones turn fuzzy, removed ones are dropped; the header filled), regenerates every
    translated copy, removes copies whose catalogue is gone, and prints the coverage of
    each document.
``check`` (in ``make test``)
    exits 1 with one line per problem (see :mod:`i18n.checks`).
``fill labsupport FILE.json...``
    puts translations ``{msgid: msgstr}`` into the library's catalogue ``labsupport.po``
    (clearing their fuzzy flags) and compiles it; prints the msgids it does not have.
``init DOMAIN...``
    starts a catalogue for each document named (``01_primitives``, ``slides-01_primitives``,
    ``README``, ``INSTRUCTOR``, or ``all``): from then on its copies are generated and
    checked, so translate all of it before committing.
``migrate``
    once (issue 37): carries every catalogue's entries to msgids without the English's
    hard wraps, tidies the headers (:mod:`i18n.migrate`), then runs ``update``; fails if
    an entry turned fuzzy. Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from i18n import catalog, checks, documents, library, migrate

LANG = "zh_CN"


def update(root: Path, lang: str) -> int:
    """Templates, merged catalogues and generated copies; print what changed and coverage."""
    expected: set[Path] = set()
    rows = []
    for doc in documents.documents(root):
        pot = catalog.template(doc, root)
        pot_path = root / doc.template()
        if not (
            pot_path.exists()
            and catalog.same_messages(pot_path.read_bytes(), catalog.serialize(pot))
        ):
            catalog.write(pot_path, catalog.serialize(pot))
        po_path = root / doc.catalogue(lang)
        if po_path.exists():
            merged = catalog.merge(pot, po_path, lang)
            if not catalog.same_messages(merged, po_path.read_bytes()):
                catalog.write(po_path, merged)
                print(f"updated {doc.catalogue(lang)}")
        cat = catalog.Catalogue(po_path if po_path.exists() else None)
        if doc.generated(root, lang):
            for path, text in documents.generate(doc, lang, cat.translate, root).items():
                expected.add(path)
                if catalog.write(root / path, text.encode("utf-8")):
                    print(f"wrote {path}")
        rows.append((doc, po_path.exists(), catalog.coverage(doc, root, cat)))
    for path in checks.generated_files(root, lang):
        if path not in expected:
            (root / path).unlink()
            print(f"removed {path} (its catalogue is gone)")
    for line in library.update(root, lang):
        print(line)
    print_coverage(rows, lang)
    cov = library.coverage(root, lang)
    print(
        f"  {library.DOMAIN + ' (the library)':32s} {cov.done:4d}/{cov.total:<4d} "
        f"{cov.percent:5.1f} %  {cov.fuzzy:3d} fuzzy  {cov.words:5d} words left"
    )
    return 0


def fill(root: Path, lang: str, names: list[str]) -> int:
    """``fill labsupport FILE.json...``: translations from JSON into the library's catalogue."""
    if len(names) < 2 or names[0] != library.DOMAIN:
        print("error: usage: python -m i18n fill labsupport FILE.json...", file=sys.stderr)
        return 1
    status = 0
    for name in names[1:]:
        changed, unknown = library.fill(root, lang, library.load_json(Path(name)))
        print(f"{name}: {changed} translation(s) filled into {library.catalogue_path(lang)}")
        print("  (then run `python -m i18n update`: the copies' stored outputs use them too)")
        for msgid in unknown:
            print(f"  not in the catalogue (run `python -m i18n update` first?): {msgid!r}")
            status = 1
    return status


def print_coverage(rows: list, lang: str) -> None:
    """Print each document's share of translated blocks."""
    print(f"\n{lang} coverage (blocks translated, fuzzy, English words left):")
    for doc, has_catalogue, cov in rows:
        if has_catalogue:
            state = f"{cov.done:4d}/{cov.total:<4d} {cov.percent:5.1f} %  {cov.fuzzy:3d} fuzzy"
            state += f"  {cov.words:5d} words left"
        else:
            state = f"   no catalogue (English only): {cov.total} blocks, {cov.words} words"
        print(f"  {doc.domain:32s} {state}")
    started = [c for _, has, c in rows if has]
    print(
        f"  {len(started)} of {len(rows)} documents have a catalogue; "
        f"{sum(c.words for _, _, c in rows)} English words left in all."
    )


def init(root: Path, lang: str, names: list[str]) -> int:
    """Start the catalogues of ``names`` (or all) for ``lang``; exit status."""
    docs = {d.domain: d for d in documents.documents(root)}
    wanted = list(docs) if names == ["all"] else names
    unknown = [n for n in wanted if n not in docs]
    if unknown:
        print(f"error: no document {', '.join(unknown)}; known: {', '.join(docs)}", file=sys.stderr)
        return 1
    for name in wanted:
        path = root / docs[name].catalogue(lang)
        if path.exists():
            print(f"{docs[name].catalogue(lang)} exists already")
            continue
        catalog.write(path, catalog.new_catalogue(catalog.template(docs[name], root), lang))
        print(f"started {docs[name].catalogue(lang)}")
    return update(root, lang)


def run_migration(root: Path, lang: str) -> int:
    """``migrate``: unwrap the msgids, tidy the catalogues, update; 1 if an entry turned fuzzy."""
    before = migrate.counts(root, lang)
    changed, merged, dropped = migrate.migrate(root, lang)
    update(root, lang)
    after = migrate.counts(root, lang)
    print(
        f"\nmigrated: {changed} msgid(s) unwrapped, {merged} merged, {dropped} obsolete dropped; "
        f"translated entries {before[0]} -> {after[0]}, fuzzy {before[1]} -> {after[1]}"
    )
    if after[1] > before[1]:
        print("error: the migration left entries fuzzy that were not", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m i18n",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["update", "check", "init", "fill", "migrate"])
    parser.add_argument(
        "names",
        nargs="*",
        help="documents to start a catalogue for (init); labsupport FILE.json... (fill)",
    )
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--lang", default=LANG, choices=sorted(documents.SUFFIX))
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "notebooks" / "solutions").is_dir():
        parser.error(f"{root} is not the course repository: run from its root or pass --root")
    if args.command == "update":
        return update(root, args.lang)
    if args.command == "migrate":
        return run_migration(root, args.lang)
    if args.command == "init":
        if not args.names:
            parser.error("init needs the documents to start (or 'all')")
        return init(root, args.lang, args.names)
    if args.command == "fill":
        return fill(root, args.lang, args.names)
    article = checks.find_article(root)
    problems = checks.check(root, args.lang, article)
    for problem in problems:
        print(problem, file=sys.stderr)
    warnings = checks.term_warnings(root, args.lang)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if warnings:
        print(
            f"{len(warnings)} warning(s): terms of GLOSSARY.md's warn-only table (not failures)",
            file=sys.stderr,
        )
    if not problems:
        started = [d for d in documents.documents(root) if (root / d.catalogue(args.lang)).exists()]
        note = "" if article else "; the reference article is not here: wording not compared"
        print(f"{args.lang}: {len(started)} catalogue(s) complete, their copies up to date{note}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
