"""``python -m labkit.capstone grade FOLDER``: grade a folder of notebook 10's notebooks.

One line per learner and a CSV gradebook::

    python -m labkit.capstone grade FOLDER [--ranks 4] [--limit 300]

Each learner's notebook runs in a process of its own with its own ranks, within a
time and a memory limit; the graders (:mod:`labsupport.runtime.check.capstone`, the same
``check_ddp`` and ``check_zero1`` a learner calls) decide in the grading process, which
runs none of the learners' code (:mod:`labkit.notebooks`, :mod:`labkit.room`). From each
notebook only the first code cell (the imports) and the cells marked ``# Exercise 10.1``
and ``# Exercise 10.2`` run, so a learner's class must not use names defined in other cells.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.notebooks import grade_folder
from labsupport.runtime.check.capstone import EXERCISES, GRADE_BATCH


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.capstone grade PATH``: one line per learner, a gradebook;
    exit status 0 if every learner could be graded, 1 if not, 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m labkit.capstone",
        description="Grade notebook 10 (capstone) notebooks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser(
        "grade", help="grade a folder of notebooks (or of one sub-folder per learner), or one"
    )
    grade.add_argument("path", type=Path, help="a folder of learners' notebooks, or one notebook")
    grade.add_argument("--ranks", type=int, default=4, help="ranks to train on (default 4)")
    grade.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one check may run on the ranks (default 60)",
    )
    grade.add_argument(
        "--limit",
        type=float,
        default=300.0,
        help="seconds for all that one notebook runs (default 300)",
    )
    grade.add_argument(
        "--memory",
        type=float,
        default=4.0,
        help="GB one learner's processes may hold together (default 4)",
    )
    grade.add_argument(
        "--gradebook",
        type=Path,
        default=Path("grades.csv"),
        help="the CSV written (default grades.csv)",
    )
    grade.add_argument("--verbose", action="store_true", help="print every failure in full")
    args = parser.parse_args(argv)
    if not args.path.is_dir() and args.path.suffix != ".ipynb":
        parser.error(f"{args.path} is neither a folder nor a .ipynb file")
    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    if args.ranks < 2 or (GRADE_BATCH // 2) % args.ranks:
        parser.error(
            f"--ranks must be at least 2 (on one rank an all-reduce takes no time, so overlap "
            f"cannot be judged) and divide {GRADE_BATCH // 2} (the graders' batch of "
            f"{GRADE_BATCH} is split over the ranks, then into two micro-batches)"
        )
    if min(args.timeout, args.limit, args.memory) <= 0:
        parser.error("--timeout, --limit and --memory must be positive")
    try:
        everyone = grade_folder(
            args.path,
            EXERCISES,
            args.ranks,
            args.timeout,
            args.limit,
            args.memory,
            args.gradebook,
            args.verbose,
        )
    except FileNotFoundError as err:
        parser.error(str(err))
    return 0 if everyone else 1


if __name__ == "__main__":
    sys.exit(main())
