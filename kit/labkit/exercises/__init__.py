"""Generate the learners' notebooks from the solution notebooks, and keep them in step.

The solution notebooks in ``notebooks/solutions/`` are the source of truth. Each is
paired with a jupytext py:percent twin (``NN_name.ipynb`` + ``NN_name.py``); the
``.py`` is the file to review, the ``.ipynb`` keeps the outputs.

Marking an exercise
-------------------
A code cell is an exercise when its first line (after any ``%%magic`` line) is a
comment naming it, and it holds one or more solution regions::

    # Exercise 01.2: implement all_gather with broadcast
    def all_gather_with_broadcast(t):
        # BEGIN SOLUTION
        ...the answer...
        # END SOLUTION

In the learner's copy each region becomes a stub at the marker's indentation::

        # Your code here.
        raise NotImplementedError("Exercise 01.2: implement all_gather with broadcast")

and the cell is tagged ``raises-exception``, so that "Run All" goes through (and
nbval accepts the error). Written answers in markdown cells use
``<!-- BEGIN SOLUTION -->`` / ``<!-- END SOLUTION -->``; the region becomes
"*Your answer here.*". Later cells must never depend on an exercise's answer: the
graders in ``labsupport.runtime.check`` report "not implemented yet" instead of raising.

A learner's copy must read right before the exercise is solved: the cell that grades an
exercise (the first ``check_...(...)`` call after it) does nothing else, so it prints
no part of the answer while the exercise is still a stub, and the text right after it
does not presume success ("It works, but..."). ``check`` reports both
(:func:`learner_copy_problems`).

A relative link from a solution to a file outside ``notebooks/`` (``../../REFERENCES.md``)
is rewritten for the learner's copy, one folder up (``../REFERENCES.md``).

Learners' copies (``notebooks/NN_name.ipynb``) have every output and execution count
cleared, no jupytext pairing, and are written as stable JSON, so that ``check`` can
compare them byte for byte with what ``build`` would write.

Command line (run from the repository root, or pass ``--notebooks DIR``)::

    python -m labkit.exercises build             # write the learners' copies
    python -m labkit.exercises check             # exit 1 if a copy or a .py twin is stale
    python -m labkit.exercises execute PATHS...  # re-run solution notebooks in place

Modules: ``marks`` (the marks and the learner's copy of a notebook), ``lint`` (what a
learner sees before solving), ``pairs`` (the jupytext twins), ``copies`` (build and check
the folder), ``run`` (execute), ``cli`` (the command line).
"""

from labkit.exercises.copies import build, check, learner_path, solution_notebooks
from labkit.exercises.lint import learner_copy_problems
from labkit.exercises.marks import (
    MARKDOWN_STUB,
    ExerciseError,
    exercise_name,
    has_solution,
    make_learner_notebook,
    render,
    strip_code_solutions,
)
from labkit.exercises.pairs import pair_difference
from labkit.exercises.run import execute

__all__ = [
    "MARKDOWN_STUB",
    "ExerciseError",
    "build",
    "check",
    "execute",
    "exercise_name",
    "has_solution",
    "learner_copy_problems",
    "learner_path",
    "make_learner_notebook",
    "pair_difference",
    "render",
    "solution_notebooks",
    "strip_code_solutions",
]
