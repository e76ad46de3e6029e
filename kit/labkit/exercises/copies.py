"""The learners' copies in ``notebooks/``: write them (``build``) and find what is stale or
wrong in the committed notebooks (``check``)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from labkit.exercises.lint import learner_copy_problems
from labkit.exercises.marks import SOLUTIONS, ExerciseError, make_learner_notebook, render
from labkit.exercises.pairs import pair_difference


def solution_notebooks(notebooks: Path) -> list[Path]:
    """The solution notebooks ``notebooks/solutions/NN_*.ipynb``, in order."""
    return sorted(p for p in (notebooks / SOLUTIONS).glob("[0-9][0-9]_*.ipynb"))


def learner_path(solution: Path, notebooks: Path) -> Path:
    """Where the learner's copy of ``solution`` lives: ``notebooks/<same name>``."""
    return notebooks / solution.name


def learner_text(solution: Path) -> str:
    """The exact text ``build`` writes for the learner's copy of ``solution``."""
    nb = nbformat.read(solution, as_version=4)
    return render(make_learner_notebook(nb, f"{SOLUTIONS}/{solution.name}"))


def build(notebooks: Path) -> list[Path]:
    """Write every learner's copy that is missing or stale; return the paths written."""
    written = []
    for solution in solution_notebooks(notebooks):
        target, text = learner_path(solution, notebooks), learner_text(solution)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


# ---------------------------------------------------------------- jupytext pairs


def check(notebooks: Path) -> list[str]:
    """Problems that would make the committed notebooks wrong (empty list when all is well)."""
    problems = []
    solutions = solution_notebooks(notebooks)
    for solution in solutions:
        target = learner_path(solution, notebooks)
        try:
            text = learner_text(solution)
        except ExerciseError as err:
            problems.append(str(err))
            continue
        if not target.exists():
            problems.append(f"{target} is missing: run `python -m labkit.exercises build`")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{target} is stale: run `python -m labkit.exercises build`")
        for problem in learner_copy_problems(nbformat.read(solution, as_version=4)):
            problems.append(f"{solution.name}: {problem}")
        difference = pair_difference(solution)
        if difference:
            problems.append(
                f"{difference}: run `jupytext --sync {solution.with_suffix('.py')}` "
                "(the newer file wins), then `make execute-notebooks`"
            )
    names = {s.name for s in solutions}
    for orphan in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        if orphan.name not in names:
            problems.append(f"{orphan} has no solution notebook in {notebooks / SOLUTIONS}")
    return problems


# ------------------------------------------------------------------------ execute
