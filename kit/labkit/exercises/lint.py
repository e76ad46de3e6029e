"""What a learner sees before solving: a grading cell that gives the answer away, or text
that presumes the exercise is solved."""

from __future__ import annotations

import ast

import nbformat

from labkit.exercises.marks import exercise_name, strip_markdown_solutions

# Openings of a paragraph that only read right once the exercise above is solved.
PRESUMES_SUCCESS = ("it works", "well done", "now that it works", "now that you", "as you found")


def _statements(source: str) -> list[ast.stmt] | None:
    """The Python statements of a code cell (magic lines dropped), or None if unparsable."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%"))
    try:
        return ast.parse(code).body
    except SyntaxError:
        return None


def _is_grader_call(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    func = statement.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name.startswith("check_")


def learner_copy_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Where a learner's copy would give an answer away or presume a solved exercise.

    For each exercise cell, the first later code cell that calls a grader
    (``check_...(...)``) must hold only imports and grader calls (anything else it
    prints shows before the exercise is solved), and the markdown right after that
    cell must not open with a phrase of :data:`PRESUMES_SUCCESS`.
    """
    problems = []
    cells = nb.cells
    for index, cell in enumerate(cells):
        name = exercise_name(cell.source) if cell.cell_type == "code" else None
        if name is None:
            continue
        for later in range(index + 1, len(cells)):
            statements = (
                _statements(cells[later].source) if cells[later].cell_type == "code" else None
            )
            if not statements or not any(_is_grader_call(s) for s in statements):
                continue
            extra = [
                s
                for s in statements
                if not (_is_grader_call(s) or isinstance(s, ast.Import | ast.ImportFrom))
            ]
            if extra:
                code = ast.unparse(extra[0])[:60]
                problems.append(
                    f"cell {later} grades {name.split(':')[0]} but also runs `{code}`: its output "
                    "shows before the exercise is solved; move it after the grading cell"
                )
            follow = cells[later + 1] if later + 1 < len(cells) else None
            if follow is not None and follow.cell_type == "markdown":
                opening = strip_markdown_solutions(follow.source).lstrip("#*_ \n").lower()
                if opening.startswith(PRESUMES_SUCCESS):
                    problems.append(
                        f"cell {later + 1} follows the grading of {name.split(':')[0]} with "
                        f"{opening[:30]!r}, which presumes the exercise is solved"
                    )
            break
    return problems


# ------------------------------------------------------------------------ notebooks
