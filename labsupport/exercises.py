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
graders in ``labsupport.check`` report "not implemented yet" instead of raising.

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

    python -m labsupport.exercises build             # write the learners' copies
    python -m labsupport.exercises check             # exit 1 if a copy or a .py twin is stale
    python -m labsupport.exercises execute PATHS...  # re-run solution notebooks in place
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
from pathlib import Path

import nbformat

SOLUTIONS = "solutions"
RAISES = "raises-exception"
STUB_COMMENT = "# Your code here."
MARKDOWN_STUB = "*Your answer here.*"

_HEADER = re.compile(r"^#\s*(Exercise\s+[^:]+:.*\S)\s*$")
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


def exercise_name(source: str) -> str | None:
    """The ``Exercise NN.k: ...`` title on the cell's first line (after magics), or None."""
    for line in source.splitlines():
        if line.startswith("%"):
            continue
        match = _HEADER.match(line.strip())
        return match.group(1) if match else None
    return None


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


def _learner_cell(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
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


# ------------------------------------------------- what a learner sees before solving

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
            "note": "Generated by `python -m labsupport.exercises build`: edit the solution.",
        }
    for index, cell in enumerate(solution.cells):
        try:
            learner.cells.append(_learner_cell(cell))
        except ExerciseError as err:
            where = f"{source_name} " if source_name else ""
            raise ExerciseError(f"{where}cell {index}: {err}") from None
    return learner


def render(nb: nbformat.NotebookNode) -> str:
    """Stable JSON text for a notebook (sorted keys, one-space indent, final newline)."""
    text = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return text if text.endswith("\n") else text + "\n"


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


def _cell_summary(nb: nbformat.NotebookNode) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", []))) for c in nb.cells]


def pair_difference(ipynb: Path) -> str | None:
    """Why ``ipynb`` and its py:percent twin disagree (cell types, sources, tags), or None."""
    import jupytext

    twin = ipynb.with_suffix(".py")
    if not twin.exists():
        return f"{twin} is missing (pair it: jupytext --set-formats ipynb,py:percent {ipynb})"
    a = _cell_summary(nbformat.read(ipynb, as_version=4))
    b = _cell_summary(jupytext.read(twin, fmt="py:percent"))
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"{ipynb.name} and {twin.name} differ at cell {index} ({x[1][:40]!r}...)"
    if len(a) != len(b):
        return f"{ipynb.name} has {len(a)} cells, {twin.name} has {len(b)}"
    return None


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
            problems.append(f"{target} is missing: run `python -m labsupport.exercises build`")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{target} is stale: run `python -m labsupport.exercises build`")
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


def _newest_source(ipynb: Path) -> nbformat.NotebookNode:
    """The notebook to run: the ``.ipynb``, or its ``.py`` twin when that is newer and differs."""
    import jupytext

    twin = ipynb.with_suffix(".py")
    if not ipynb.exists():
        return jupytext.read(twin, fmt="py:percent")
    nb = nbformat.read(ipynb, as_version=4)
    if twin.exists() and twin.stat().st_mtime > ipynb.stat().st_mtime and pair_difference(ipynb):
        print(f"  {twin.name} is newer: taking the cells from it")
        text_nb = jupytext.read(twin, fmt="py:percent")
        old_ids = {(c.cell_type, c.source): c.get("id") for c in nb.cells}
        for cell in text_nb.cells:  # keep cell ids stable where the cell did not change
            cell.id = old_ids.get((cell.cell_type, cell.source)) or cell.id
        text_nb.metadata = {**nb.metadata, **{"jupytext": nb.metadata.get("jupytext", {})}}
        nb = text_nb
    return nb


def _current_env_kernel_manager():  # noqa: ANN202 - jupyter_client types
    """A kernel manager that starts ipykernel with this very interpreter (like nbval's)."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class _CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="current environment",
                language="python",
            )

    return KernelManager(kernel_name="current-env", kernel_spec_manager=_CurrentEnv())


def execute(paths: list[Path], timeout: float = 600.0) -> None:
    """Re-run each solution notebook top to bottom in place, then bring its .py twin in step."""
    # Stored outputs in rank order, whatever the machine's speed (no live streaming):
    # the kernels started below inherit this; our own environment is restored after.
    saved = os.environ.get("LABSUPPORT_LIVE_AFTER")
    os.environ.setdefault("LABSUPPORT_LIVE_AFTER", "inf")
    try:
        _execute_each(paths, timeout)
    finally:
        if saved is None:
            os.environ.pop("LABSUPPORT_LIVE_AFTER", None)


def _execute_each(paths: list[Path], timeout: float) -> None:
    import jupytext
    from nbclient import NotebookClient

    for path in paths:
        path = Path(path).with_suffix(".ipynb")
        print(f"executing {path}")
        nb = _newest_source(path)
        kernelspec = copy.deepcopy(nb.metadata.get("kernelspec"))
        client = NotebookClient(
            nb,
            timeout=timeout,
            km=_current_env_kernel_manager(),
            record_timing=False,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        client.execute()
        if kernelspec is not None:
            nb.metadata["kernelspec"] = kernelspec
        nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
        path.write_text(render(nb), encoding="utf-8")
        if pair_difference(path):
            jupytext.write(nb, path.with_suffix(".py"), fmt="py:percent")
            print(f"  rewrote {path.with_suffix('.py').name} to match")


# ---------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``build``, ``check`` or ``execute PATHS...``."""
    parser = argparse.ArgumentParser(prog="python -m labsupport.exercises", description=__doc__)
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


if __name__ == "__main__":
    sys.exit(main())
