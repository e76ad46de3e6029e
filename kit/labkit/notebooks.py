"""Grade a room's notebooks: each learner in a process of its own, one line and one CSV row each.

:func:`grade_folder` finds the learners (one ``.ipynb`` per learner, named by the file,
or one sub-folder per learner, named by the folder; or a single notebook), grades each
with :func:`labkit.room.grade_learner` (its own process and ranks, a time
and a memory limit, the verdict decided outside its reach), prints one line per
learner (:func:`summary`) and writes a gradebook (:func:`write_gradebook`: one row per
learner, one column per exercise, as nbgrader's and Otter-Grader's exports have).

It does not run the notebooks whole: only their first code cell and the exercise
cells run (:mod:`labkit.answers`).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path
from typing import Any

from labkit.answers import Exercises, exercise_cells, grade_answers, load_answers
from labkit.room import Graded, grade_learner
from labsupport.runtime.check.messages import CheckResult

_SKIP = {".ipynb_checkpoints", "__pycache__"}

__all__ = [
    "Exercises",
    "exercise_cells",
    "grade_answers",
    "grade_folder",
    "learners",
    "load_answers",
    "summary",
    "write_gradebook",
]


def summary(
    name: str,
    results: dict[str, CheckResult],
    stopped: str | None = None,
    exercises: list[str] | None = None,
) -> str:
    """One line: the learner, each exercise's status (``----``: not graded), the first
    failure's first line, or why the learner could not be graded."""
    names = exercises or list(results)
    statuses = "  ".join(f"{e} {results[e].status if e in results else '----'}" for e in names)
    if stopped:
        return f"{name}: {statuses}  (not graded: {stopped})"
    failed = [(e, r) for e, r in results.items() if not r.passed]
    if not failed:
        return f"{name}: {statuses}"
    return f"{name}: {statuses}  ({_reason(*failed[0])})"


def _reason(exercise: str, result: CheckResult) -> str:
    """The exercise and the first line of its message, without the status word."""
    first = result.message.splitlines()[0] if result.message else ""
    return f"{exercise}: " + re.sub(
        rf"^(PASS|FAIL|TODO) (Exercise {re.escape(exercise)}: )?", "", first
    )


def learners(path: Path, exercises: list[str]) -> list[tuple[str, Path | None, str | None]]:
    """(learner, notebook or None, why none) for a notebook, a folder of notebooks, or a
    folder of sub-folders (one per learner: the notebook with the exercise cells in it)."""
    if path.is_file():
        return [(path.stem, path, None)]
    found: list[tuple[str, Path | None, str | None]] = []
    for entry in sorted(path.iterdir()):
        if entry.name in _SKIP or entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            found.append((entry.stem, entry, None))
        elif entry.is_dir():
            found.append((entry.name, *_pick(entry, exercises)))
    if not found:
        raise FileNotFoundError(
            f"no .ipynb files or sub-folders in {path}: give the folder of notebooks"
        )
    counts: dict[str, int] = {}
    for name, _, _ in found:
        counts[name] = counts.get(name, 0) + 1
    return [  # alice.ipynb next to alice/: tell them apart
        (str(nb.relative_to(path)) if counts[name] > 1 and nb else name, nb, why)
        for name, nb, why in found
    ]


def _pick(folder: Path, exercises: list[str]) -> tuple[Path | None, str | None]:
    """The one notebook of a learner's folder that holds the exercises."""
    notebooks = [p for p in sorted(folder.rglob("*.ipynb")) if not _SKIP & set(p.parts)]
    if len(notebooks) == 1:
        return notebooks[0], None
    if not notebooks:
        return None, "no .ipynb file in the folder"
    headers = [f"# Exercise {e}:" for e in exercises]
    holding = [p for p in notebooks if any(h in p.read_text(errors="replace") for h in headers)]
    if len(holding) == 1:
        return holding[0], None
    names = ", ".join(str(p.relative_to(folder)) for p in holding or notebooks)
    return None, f"{len(holding or notebooks)} notebooks could be the one ({names}): keep one"


def write_gradebook(path: Path, rows: list[dict[str, Any]], exercises: list[str]) -> None:
    """The CSV: learner, notebook, one column per exercise (1 passed, 0 not, empty: not
    graded), total, possible, graded (yes/no), seconds it took, note (the first failure,
    or why it could not be graded). Written whole, then renamed into place."""
    columns = ["learner", "notebook", *exercises, "total", "possible", "graded", "seconds", "note"]
    partial = path.with_name(path.name + ".part")
    with partial.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    partial.replace(path)


def _row(name: str, notebook: Path | None, graded: Any, exercises: list[str]) -> dict[str, Any]:
    results, stopped = graded.results, graded.stopped
    row: dict[str, Any] = {"learner": name, "notebook": str(notebook or "")}
    for e in exercises:
        row[e] = "" if e not in results else int(results[e].passed)
    row["total"] = sum(int(r.passed) for r in results.values())
    row["possible"] = len(exercises)
    row["graded"] = "no" if stopped else "yes"
    row["seconds"] = f"{graded.seconds:.0f}"
    failed = [_reason(e, r) for e, r in results.items() if not r.passed]
    row["note"] = stopped or (failed[0] if failed else "")
    return row


def grade_folder(
    path: Path,
    exercises: Exercises,
    ranks: int = 4,
    timeout: float = 60.0,
    limit: float = 300.0,
    memory_gb: float = 4.0,
    gradebook: Path | None = None,
    verbose: bool = False,
) -> bool:
    """Grade every learner under ``path``; print one line each, write ``gradebook`` (CSV,
    rewritten after each learner); True if every learner could be graded."""
    names = list(exercises)
    rows, ungraded = [], []
    for name, notebook, why in learners(path, names):
        if notebook is None:
            graded = Graded(stopped=why)
        else:
            graded = grade_learner(notebook, exercises, ranks, timeout, limit, memory_gb)
        print(summary(name, graded.results, graded.stopped, names), flush=True)
        if verbose:
            for r in graded.results.values():
                if not r.passed:
                    print("    " + r.message.replace("\n", "\n    "), flush=True)
            if graded.stopped and graded.log.strip():
                print(
                    "    its process's last output:\n      "
                    + graded.log.strip().replace("\n", "\n      "),
                    flush=True,
                )
        if graded.stopped:
            ungraded.append(name)
        rows.append(_row(name, notebook, graded, names))
        if gradebook is not None:
            write_gradebook(gradebook, rows, names)
    done = len(rows) - len(ungraded)
    print(
        f"graded {done} of {len(rows)} learners"
        + (f"; not graded: {', '.join(ungraded)}" if ungraded else "")
        + (f"; gradebook: {gradebook}" if gradebook else ""),
        file=sys.stderr,
    )
    return not ungraded
