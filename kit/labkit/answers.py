"""A learner's answers read from a notebook, and graded: what runs, and what does not.

:func:`load_answers` runs the first code cell (its imports; ``%`` and ``!`` lines dropped)
and the exercise cells (those whose first line is ``# Exercise NN.k: ...``, as in
:mod:`labkit.exercises`), in order, in a fresh namespace, as Jupyter would (an exception,
``SystemExit`` included, fails its cell only). The classes and functions defined there
reach the ranks by value. :func:`grade_answers` calls each exercise's grader on them.

A grader served here is called ``grader(answer, cluster, timeout)`` in the grading
process, with a stand-in for the answer: it must use the answer on the ranks only
(``cluster.call`` / ``cluster.run``), and the ranks must return plain data and tensors.
"""

from __future__ import annotations

import linecache
import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

from labkit.exercises.marks import exercise_number
from labsupport.runtime.check.messages import FAIL, CheckResult

#: Exercise number -> (the name its cell defines, the grader: ``grader(answer, cluster, timeout)``).
Exercises = dict[str, tuple[str, Callable[..., CheckResult]]]


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
            number = exercise_number(cell.source)
            if number:
                found[number] = cell.source
    return found


def _compile(source: str, filename: str) -> Any:
    """The cell compiled, its source kept where tracebacks look for it."""
    code = _code(source)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    return compile(code, filename, "exec")


def _error(exc: BaseException, filename: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f" (line {frames[-1].lineno}: `{(frames[-1].line or '').strip()}`)" if frames else ""
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"


def load_answers(
    path: Path, exercises: list[str], on_cell: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(namespace, {exercise: what went wrong}) after running the imports and exercise cells.

    ``on_cell(what)`` is told before each cell ("running its first cell", ...).
    """
    nb = nbformat.read(path, as_version=4)
    module = "learner_" + re.sub(r"\W", "_", path.stem)  # not importable: pickled by value
    namespace: dict[str, Any] = {"__name__": module}
    problems: dict[str, str] = {}
    tell = on_cell or (lambda what: None)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    if not code:
        return namespace, {e: "the notebook has no code cells" for e in exercises}
    tell("running its first cell")
    filename = f"{path.name}, first cell"
    try:
        exec(_compile(code[0], filename), namespace)
    except BaseException as exc:  # the learner's notebook: report, never raise (as Jupyter)
        why = f"its first cell (imports) fails: {_error(exc, filename)}"
        return namespace, dict.fromkeys(exercises, why)
    cells = exercise_cells(nb)
    for exercise in exercises:
        if exercise not in cells:
            problems[exercise] = f"no cell starts with `# Exercise {exercise}:`"
            continue
        filename = f"{path.name}, Exercise {exercise}"
        tell(f"running the cell of Exercise {exercise}")
        try:
            exec(_compile(cells[exercise], filename), namespace)
        except BaseException as exc:
            problems[exercise] = f"its cell fails: {_error(exc, filename)}"
    return namespace, problems


def grade_answers(
    answers: dict[str, Any],
    problems: dict[str, str],
    exercises: Exercises,
    cluster: Any,
    timeout: float,
) -> dict[str, CheckResult]:
    """Each exercise's result: a FAIL for its problem, or its answer given to its grader."""
    import contextlib
    import io

    results = {}
    for exercise, (_, grader) in exercises.items():
        if exercise in problems or exercise not in answers:
            why = problems.get(exercise, "no answer")
            results[exercise] = CheckResult(False, f"{FAIL} Exercise {exercise}: {why}")
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the one-line summary says it
                results[exercise] = grader(answers[exercise], cluster, timeout)
        except Exception as exc:  # one learner's surprise must not stop the folder
            why = f"the grader could not run it: {type(exc).__name__}: {exc}"
            results[exercise] = CheckResult(False, f"{FAIL} Exercise {exercise}: {why}")
    return results
