"""The exercise marks in a solution notebook, and the learner's copy they make.

See :mod:`labkit.exercises` for how an exercise is marked.
"""

from __future__ import annotations

import copy
import re

import nbformat

SOLUTIONS = "solutions"
RAISES = "raises-exception"
STUB_COMMENT = "# Your code here."
MARKDOWN_STUB = "*Your answer here.*"

_HEADER = re.compile(r"^#\s*(Exercise\s+([^:]+?)\s*:.*\S)\s*$")
_BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*# END SOLUTION\s*$")
_MD_REGION = re.compile(r"<!--\s*BEGIN SOLUTION\s*-->.*?<!--\s*END SOLUTION\s*-->", re.DOTALL)
_MD_MARKER = re.compile(r"<!--\s*(BEGIN|END) SOLUTION\s*-->")
_LINK_OUT = re.compile(r"\]\(\.\./\.\./")
# Cell metadata that records a particular run, not the notebook's content.
_RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")


class ExerciseError(ValueError):
    """A solution notebook's exercise markers are malformed."""


# --------------------------------------------------------------------------- cells


def _header(source: str) -> re.Match | None:
    """The ``# Exercise NN.k: ...`` line opening a cell (after blank and ``%%magic`` lines)."""
    for line in source.splitlines():
        if line.startswith("%") or not line.strip():
            continue
        return _HEADER.match(line.strip())
    return None


def exercise_name(source: str) -> str | None:
    """The ``Exercise NN.k: ...`` title on the cell's first line (after magics), or None."""
    match = _header(source)
    return match.group(1) if match else None


def exercise_number(source: str) -> str | None:
    """The ``NN.k`` of the cell's ``# Exercise NN.k: ...`` line, or None."""
    match = _header(source)
    return match.group(2) if match else None


def has_solution(source: str) -> bool:
    """True if the source contains a solution marker (code or markdown)."""
    lines = source.splitlines()
    return any(_BEGIN.match(x) or _END.match(x) for x in lines) or bool(_MD_MARKER.search(source))


def _quote(text: str) -> str:
    """A Python string literal for ``text``, with double quotes when that is possible."""
    return f'"{text}"' if '"' not in text and "\\" not in text else repr(text)


def strip_code_solutions(source: str, name: str) -> str:
    """Replace each ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` region by a stub naming ``name``."""
    out: list[str] = []
    indent: str | None = None
    for number, line in enumerate(source.splitlines(), start=1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if indent is not None:
                raise ExerciseError(f"line {number}: BEGIN SOLUTION inside another region")
            indent = begin.group(1)
            out.append(indent + STUB_COMMENT)
            out.append(f"{indent}raise NotImplementedError({_quote(name)})")
        elif end:
            if indent is None:
                raise ExerciseError(f"line {number}: END SOLUTION without BEGIN SOLUTION")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise ExerciseError("BEGIN SOLUTION without END SOLUTION")
    return "\n".join(out)


def strip_markdown_solutions(source: str) -> str:
    """Replace every ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` region."""
    stripped = _MD_REGION.sub(MARKDOWN_STUB, source)
    if _MD_MARKER.search(stripped):
        raise ExerciseError("unbalanced <!-- BEGIN/END SOLUTION --> markers")
    return stripped


def learner_cell(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's copy of one cell: solutions stubbed, outputs cleared, links one folder up."""
    cell = copy.deepcopy(cell)
    for key in _RUN_METADATA:
        cell.metadata.pop(key, None)
    if cell.cell_type == "markdown":
        cell.source = strip_markdown_solutions(cell.source)
        # A solution sits one folder deeper than its learner's copy: a link out of
        # notebooks/ (``../../REFERENCES.md``) loses one ``../`` in the copy.
        cell.source = _LINK_OUT.sub("](../", cell.source)
    if cell.cell_type != "code":
        return cell
    cell.outputs = []
    cell.execution_count = None
    if has_solution(cell.source):
        name = exercise_name(cell.source)
        if name is None:
            first = cell.source.splitlines()[0] if cell.source else ""
            raise ExerciseError(
                f"a cell with a solution region must start with '# Exercise NN.k: title' "
                f"(it starts with {first!r})"
            )
        cell.source = strip_code_solutions(cell.source, name)
        tags = cell.metadata.setdefault("tags", [])
        if RAISES not in tags:
            tags.append(RAISES)
    return cell


def make_learner_notebook(
    solution: nbformat.NotebookNode, source_name: str = ""
) -> nbformat.NotebookNode:
    """The learner's copy of a solution notebook (a new object; the input is unchanged)."""
    learner = nbformat.v4.new_notebook()
    learner.nbformat, learner.nbformat_minor = solution.nbformat, solution.nbformat_minor
    learner.metadata = copy.deepcopy(solution.metadata)
    for key in ("jupytext", "widgets"):
        learner.metadata.pop(key, None)
    if source_name:
        learner.metadata["labsupport"] = {
            "generated_from": source_name,
            "note": "Generated by `python -m labkit.exercises build`: edit the solution.",
        }
    for index, cell in enumerate(solution.cells):
        try:
            learner.cells.append(learner_cell(cell))
        except ExerciseError as err:
            where = f"{source_name} " if source_name else ""
            raise ExerciseError(f"{where}cell {index}: {err}") from None
    return learner


def render(nb: nbformat.NotebookNode) -> str:
    """Stable JSON text for a notebook (sorted keys, one-space indent, final newline)."""
    text = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return text if text.endswith("\n") else text + "\n"
