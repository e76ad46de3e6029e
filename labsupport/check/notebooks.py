"""Grade learners' notebooks without running them whole: take out their answers, grade those.

:func:`load_answers` runs the notebook's first code cell (its imports; ``%`` and ``!``
lines dropped) and the exercise cells it is asked for (those whose first line is
``# Exercise NN.k: ...``, as in :mod:`labsupport.exercises`) in a fresh namespace, in
order, and returns that namespace with what went wrong, per exercise. The classes and
functions defined there can be sent to the ranks (``cloudpickle`` carries them by
value, since their module is not importable).

:func:`grade_folder` does that for every notebook of a folder, gives each answer to its
grader on one group of ranks, and prints one line per learner (:func:`summary`).
"""

from __future__ import annotations

import contextlib
import io
import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

from labsupport.check.messages import FAIL, CheckResult

#: Exercise number -> (the name its cell defines, the grader: ``grader(answer, cluster, timeout)``).
Exercises = dict[str, tuple[str, Callable[..., CheckResult]]]

_HEADER = re.compile(r"^#\s*Exercise\s+(\S+?):")


def _code(source: str) -> str:
    """The cell without IPython's ``%magic`` and ``!shell`` lines (a fresh namespace has none)."""
    lines = source.splitlines()
    if lines and lines[0].startswith("%%"):
        return ""  # a cell magic (e.g. %%ranks) runs elsewhere, not here
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def exercise_cells(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise number (``"10.1"``) -> the source of its cell."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            match = _HEADER.match(cell.source.lstrip().split("\n", 1)[0])
            if match:
                found[match.group(1)] = cell.source
    return found


def _error(exc: BaseException, filename: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f" (line {frames[-1].lineno}: `{(frames[-1].line or '').strip()}`)" if frames else ""
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"


def load_answers(path: Path, exercises: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(namespace, {exercise: what went wrong}) after running the imports and exercise cells."""
    nb = nbformat.read(path, as_version=4)
    module = "learner_" + re.sub(r"\W", "_", path.stem)  # not importable: pickled by value
    namespace: dict[str, Any] = {"__name__": module}
    problems: dict[str, str] = {}
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    if not code:
        return namespace, {e: "the notebook has no code cells" for e in exercises}
    try:
        exec(compile(_code(code[0]), f"{path.name}, first cell", "exec"), namespace)
    except Exception as exc:  # the learner's notebook: report, never raise
        return namespace, {e: f"its first cell (imports) fails: {exc}" for e in exercises}
    cells = exercise_cells(nb)
    for exercise in exercises:
        if exercise not in cells:
            problems[exercise] = f"no cell starts with `# Exercise {exercise}:`"
            continue
        filename = f"{path.name}, Exercise {exercise}"
        try:
            exec(compile(_code(cells[exercise]), filename, "exec"), namespace)
        except Exception as exc:
            problems[exercise] = f"its cell fails: {_error(exc, filename)}"
    return namespace, problems


def grade_notebook(
    path: Path, exercises: Exercises, cluster: Any, timeout: float = 120.0
) -> dict[str, CheckResult]:
    """Each exercise's result for one learner's notebook: its answer, given to its grader."""
    namespace, problems = load_answers(path, list(exercises))
    results = {}
    for exercise, (class_name, grader) in exercises.items():
        answer = namespace.get(class_name)
        if exercise in problems or answer is None:
            why = problems.get(exercise) or f"its cell does not define {class_name}"
            results[exercise] = CheckResult(False, f"{FAIL} Exercise {exercise}: {why}")
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the one-line summary says it
                results[exercise] = grader(answer, cluster, timeout)
        except Exception as exc:  # one learner's surprise must not stop the folder
            why = f"the grader could not run it: {type(exc).__name__}: {exc}"
            results[exercise] = CheckResult(False, f"{FAIL} Exercise {exercise}: {why}")
    return results


def summary(name: str, results: dict[str, CheckResult]) -> str:
    """One line: the learner, each exercise's status, the first failure's first line."""
    statuses = "  ".join(f"{e} {r.status}" for e, r in results.items())
    failed = [(e, r) for e, r in results.items() if not r.passed]
    if not failed:
        return f"{name}: {statuses}"
    exercise, first = failed[0]
    reason = re.sub(r"^(PASS|FAIL|TODO) ", "", first.message.splitlines()[0])
    return f"{name}: {statuses}  ({exercise}: {reason})"


def grade_folder(
    folder: Path, exercises: Exercises, ranks: int = 4, timeout: float = 120.0,
    verbose: bool = False,
) -> list[str]:  # fmt: skip
    """Grade every ``*.ipynb`` in ``folder`` (sorted by name) on one group of ``ranks``;
    print and return one line per notebook (``verbose``: every failure in full too)."""
    from labsupport.launch import Cluster

    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no .ipynb files in {folder}: give the folder of notebooks")
    lines = []
    with Cluster(ranks, backend="gloo", timeout=max(timeout, 60.0)) as cluster:
        for path in paths:
            results = grade_notebook(path, exercises, cluster, timeout)
            lines.append(summary(path.stem, results))
            print(lines[-1], flush=True)
            if verbose:
                for r in results.values():
                    if not r.passed:
                        print("    " + r.message.replace("\n", "\n    "), flush=True)
    return lines
