"""Take a learner's answers out of a notebook, to grade them without running the whole notebook.

:func:`load_answers` runs the notebook's first code cell (its imports; ``%`` and ``!``
lines dropped) and the exercise cells it is asked for (those whose first line is
``# Exercise NN.k: ...``, as in :mod:`labsupport.exercises`) in a fresh namespace, in
order, and returns that namespace with what went wrong, per exercise. The classes and
functions defined there can be sent to the ranks (``cloudpickle`` carries them by
value, since their module is not importable).
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any

import nbformat

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
