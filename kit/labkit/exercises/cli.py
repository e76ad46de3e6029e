"""``python -m labkit.exercises build | check | execute PATHS...``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.exercises import __doc__ as _DOC
from labkit.exercises.copies import build, check, solution_notebooks
from labkit.exercises.marks import SOLUTIONS, ExerciseError
from labkit.exercises.run import execute


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``build``, ``check`` or ``execute PATHS...``."""
    parser = argparse.ArgumentParser(prog="python -m labkit.exercises", description=_DOC)
    parser.add_argument("command", choices=["build", "check", "execute"])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to execute")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cell")
    args = parser.parse_args(argv)
    if args.command != "execute" and not (args.notebooks / SOLUTIONS).is_dir():
        parser.error(f"no {args.notebooks / SOLUTIONS} here: run from the repository root")
    try:
        if args.command == "build":
            for path in build(args.notebooks):
                print(f"wrote {path}")
            return 0
        if args.command == "check":
            problems = check(args.notebooks)
            for problem in problems:
                print(problem, file=sys.stderr)
            if not problems:
                print(f"{len(solution_notebooks(args.notebooks))} notebooks up to date")
            return 1 if problems else 0
        if not args.paths:
            parser.error("execute needs the notebooks to run")
        execute(args.paths, timeout=args.timeout)
        return 0
    except ExerciseError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
