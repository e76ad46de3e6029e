"""The exercise pipeline: learners' copies generated from solution notebooks."""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat
import pytest
from labkit import exercises as ex
from labkit.exercises import cli

EXERCISE = """# Exercise 01.2: implement all_gather with broadcast
def all_gather_with_broadcast(t):
    out = []
    # BEGIN SOLUTION
    out.append(t)
    # END SOLUTION
    return out"""


def _solution_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    intro = nbformat.v4.new_markdown_cell(
        "# Title\n\nWhy? <!-- BEGIN SOLUTION -->Because.<!-- END SOLUTION -->"
    )
    plain = nbformat.v4.new_code_cell("x = 1\nx")
    plain.execution_count = 1
    plain.outputs = [
        nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=1)
    ]
    plain.metadata["execution"] = {"iopub.status.busy": "2025-01-01T00:00:00"}
    exercise = nbformat.v4.new_code_cell(EXERCISE)
    exercise.execution_count = 2
    for index, cell in enumerate(nb.cells + [intro, plain, exercise]):
        cell.id = f"cell-{index}"
    nb.cells = [intro, plain, exercise]
    return nb


def _write_pair(folder: Path, name: str, nb: nbformat.NotebookNode) -> Path:
    solutions = folder / "solutions"
    solutions.mkdir(parents=True, exist_ok=True)
    path = solutions / name
    nbformat.write(nb, path)
    jupytext.write(nb, path.with_suffix(".py"), fmt="py:percent")
    return path


def test_stub_names_the_exercise_keeps_indentation_and_drops_the_answer():
    stub = ex.strip_code_solutions(EXERCISE, ex.exercise_name(EXERCISE))
    assert (
        '    raise NotImplementedError("Exercise 01.2: implement all_gather with broadcast")'
        in stub.splitlines()
    )
    assert "out.append(t)" not in stub
    assert stub.splitlines()[-1] == "    return out"


def test_the_exercise_header_may_follow_a_cell_magic():
    source = (
        "%%ranks -n 4\n# Exercise 02.1: fix the exchange\n# BEGIN SOLUTION\npass\n# END SOLUTION"
    )
    assert ex.exercise_name(source) == "Exercise 02.1: fix the exchange"
    stub = ex.strip_code_solutions(source, "Exercise 02.1: fix the exchange")
    assert stub.startswith("%%ranks -n 4\n")
    with pytest.raises(NotImplementedError, match="02.1"):
        exec(stub.split("\n", 1)[1])


def test_learner_copy_clears_outputs_tags_exercises_and_leaves_the_solution_alone():
    solution = _solution_notebook()
    before = ex.render(solution)
    learner = ex.make_learner_notebook(solution, "solutions/01_x.ipynb")
    assert ex.render(solution) == before
    intro, plain, exercise = learner.cells
    assert "Because" not in intro.source and ex.MARKDOWN_STUB in intro.source
    assert plain.outputs == [] and plain.execution_count is None
    assert "execution" not in plain.metadata and "tags" not in plain.metadata
    assert exercise.metadata["tags"] == ["raises-exception"]
    assert "jupytext" not in learner.metadata
    assert [c.id for c in learner.cells] == [c.id for c in solution.cells]


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f():\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION", "must start with"),
        ("# Exercise 1.1: x\n# BEGIN SOLUTION\npass", "without END"),
        ("# Exercise 1.1: x\npass\n# END SOLUTION", "without BEGIN"),
        ("# Exercise 1.1: x\n# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION", "inside"),
    ],
)
def test_malformed_markers_are_reported_with_the_cell(source, message):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    with pytest.raises(ex.ExerciseError, match=message) as info:
        ex.make_learner_notebook(nb, "solutions/09_bad.ipynb")
    assert "09_bad.ipynb cell 0" in str(info.value)


def test_build_then_check_is_clean_and_a_second_build_writes_nothing(tmp_path):
    _write_pair(tmp_path, "01_x.ipynb", _solution_notebook())
    assert ex.check(tmp_path)  # the learner's copy is missing
    assert ex.build(tmp_path) == [tmp_path / "01_x.ipynb"]
    assert ex.check(tmp_path) == []
    assert ex.build(tmp_path) == []
    learner = nbformat.read(tmp_path / "01_x.ipynb", as_version=4)
    nbformat.validate(learner)
    assert '"execution_count": null' in (tmp_path / "01_x.ipynb").read_text()


def test_check_finds_a_stale_copy_an_unsynced_twin_and_an_orphan(tmp_path):
    path = _write_pair(tmp_path, "01_x.ipynb", _solution_notebook())
    ex.build(tmp_path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = "x = 2\nx"
    nbformat.write(nb, path)
    (tmp_path / "07_orphan.ipynb").write_text("{}")
    problems = "\n".join(ex.check(tmp_path))
    assert "01_x.ipynb is stale" in problems
    assert "01_x.ipynb and 01_x.py differ at cell 1" in problems
    assert "07_orphan.ipynb has no solution" in problems
    assert cli.main(["check", "--notebooks", str(tmp_path)]) == 1


def test_a_missing_twin_is_a_problem(tmp_path):
    path = _write_pair(tmp_path, "01_x.ipynb", _solution_notebook())
    ex.build(tmp_path)
    path.with_suffix(".py").unlink()
    assert any("01_x.py is missing" in p for p in ex.check(tmp_path))


def test_execute_runs_the_newer_twin_stores_outputs_and_allows_tagged_errors(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("import os\nprint(os.path.basename(os.getcwd()))")]
    path = _write_pair(tmp_path, "01_x.ipynb", nb)
    text_nb = jupytext.read(path.with_suffix(".py"))
    bad = nbformat.v4.new_code_cell("1 / 0")
    bad.metadata["tags"] = ["raises-exception"]
    text_nb.cells.append(bad)
    jupytext.write(text_nb, path.with_suffix(".py"), fmt="py:percent")
    stamp = path.stat().st_mtime
    os.utime(path.with_suffix(".py"), (stamp + 10, stamp + 10))

    ex.execute([path], timeout=60)

    done = nbformat.read(path, as_version=4)
    assert done.cells[0].outputs[0]["text"] == "solutions\n"  # ran in the notebook's folder
    assert done.cells[1].outputs[0]["ename"] == "ZeroDivisionError"
    assert done.metadata["kernelspec"]["name"] == "python3"
    assert ex.pair_difference(path) is None


def _exercise_then(*cells: tuple[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(EXERCISE)]
    for kind, source in cells:
        new = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        nb.cells.append(new(source))
    return nb


def test_a_grading_cell_that_prints_more_than_the_grade_gives_the_answer_away():
    leak = _exercise_then(
        ("code", "checks.check_all_gather(all_gather_with_broadcast)\nprint('the answer is 2x')"),
    )
    [problem] = ex.learner_copy_problems(leak)
    assert "cell 1 grades Exercise 01.2 but also runs `print('the answer is 2x')`" in problem
    clean = _exercise_then(
        ("code", "from labsupport.runtime.check import primitives as checks"),
        ("code", "%%capture\nfrom x import check_it\ncheck_it(all_gather_with_broadcast)"),
        ("markdown", "Whether or not it passed, compare ..."),
        ("code", "print('the answer is 2x')  # after the grade: fine"),
    )
    assert ex.learner_copy_problems(clean) == []


def test_text_after_a_grade_must_not_presume_the_exercise_is_solved():
    presumes = _exercise_then(("code", "check_it(f)"), ("markdown", "It works, but it is slow."))
    [problem] = ex.learner_copy_problems(presumes)
    assert "cell 2 follows the grading of Exercise 01.2" in problem and "presumes" in problem


def test_no_learner_copy_gives_an_answer_away_before_its_exercise():
    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    for path in ex.solution_notebooks(notebooks):
        learner = nbformat.read(ex.learner_path(path, notebooks), as_version=4)
        assert ex.learner_copy_problems(learner) == [], path.name
