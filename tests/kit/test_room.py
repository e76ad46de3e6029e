"""The folder grader (labkit.notebooks, .room, .learner): each learner's notebook in
a process of its own, so that a loop, an exit, a crash, a memory blow-up or a patched grader
costs that learner alone, and the verdict is decided where no learner code runs."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from labkit.notebooks import grade_folder, learners
from labkit.room import grade_learner

from labsupport.runtime.check import FAIL, PASS, CheckResult, explain_failure

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "notebooks" / "solutions" / "10_capstone.ipynb"


def _notebook(first: str, cells: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first)] + [
        nbformat.v4.new_code_cell(f"# Exercise {e}: x\n{src}") for e, src in cells.items()
    ]
    return nb


def _write(path: Path, nb: nbformat.NotebookNode) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _cell(nb: nbformat.NotebookNode, exercise: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.source.startswith(f"# Exercise {exercise}:"))


def _first_code(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code")


def _passes(answer, cluster, timeout) -> CheckResult:
    return CheckResult(True, f"{PASS} {answer.__name__} defined")


# ------------------------------------------------------------------ the seven notebooks
def _room(folder: Path) -> None:
    """Seven capstone notebooks made from the solution, as in issue 26."""

    def variant(edit) -> nbformat.NotebookNode:
        nb = nbformat.read(SOLUTION, as_version=4)
        edit(nb)
        return nb

    def summed(nb):  # gradients summed over the ranks, not averaged
        cell = _cell(nb, "10.1")
        assert ".div_(self.world_size)" in cell.source
        cell.source = cell.source.replace(".div_(self.world_size)", "")

    def patched(nb):  # the same wrong answer, after silencing the grader's comparison
        summed(nb)
        _first_code(nb).source += (
            "\nimport labsupport.runtime.capstone.compare"
            "\nlabsupport.capstone.compare.first_divergence = lambda *a, **k: None\n"
        )

    def loop(nb):
        _first_code(nb).source = "while True:\n    pass\n" + _first_code(nb).source

    def exits(nb):
        cell = _cell(nb, "10.1")
        cell.source = cell.source.replace("class MyDDP", "raise SystemExit(0)\nclass MyDDP", 1)

    def os_exit(nb):
        cell = _cell(nb, "10.2")
        cell.source = cell.source.replace("class MyZeRO1", "import os\nos._exit(3)\nclass MyZeRO1")

    _write(folder / "alice.ipynb", variant(lambda nb: None))
    _write(folder / "bob.ipynb", variant(loop))
    _write(folder / "carol.ipynb", variant(exits))
    _write(folder / "dave.ipynb", variant(os_exit))
    _write(folder / "erin.ipynb", variant(patched))
    _write(folder / "frank.ipynb", variant(summed))
    # grace hands in her whole notebooks folder: the grader picks the capstone from it
    _write(folder / "grace" / "notebooks" / "10_capstone.ipynb", variant(lambda nb: None))
    (folder / "grace" / "notebooks" / "00_welcome.ipynb").write_text(
        (ROOT / "notebooks" / "00_welcome.ipynb").read_text()
    )


@pytest.mark.timeout(1200)
def test_a_room_of_seven_notebooks_is_graded_each_learner_alone(tmp_path):
    room, gradebook, limit = tmp_path / "room", tmp_path / "grades.csv", 90
    _room(room)
    cmd = [sys.executable, "-m", "labkit.capstone", "grade", str(room), "--ranks", "2",
           "--limit", str(limit), "--timeout", "45", "--gradebook", str(gradebook)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert list(lines) == ["alice", "bob", "carol", "dave", "erin", "frank", "grace"], done
    assert lines["alice"] == lines["grace"] == "10.1 PASS  10.2 PASS"
    # the loop: stopped at the limit; the rest of the room is still graded
    assert lines["bob"].startswith("10.1 ----  10.2 ----  (not graded: still running its first")
    assert f"after {limit} s" in lines["bob"]
    # SystemExit fails its cell, as in Jupyter; the other exercise is graded
    assert lines["carol"].startswith("10.1 FAIL  10.2 PASS") and "SystemExit" in lines["carol"]
    # os._exit ends that learner's process only, and the line says where
    assert lines["dave"].startswith("10.1 ----  10.2 ----  (not graded: its process exited")
    assert "code 3" in lines["dave"] and "Exercise 10.2" in lines["dave"]
    # the patch changes the patcher's process, not the verdict: both wrong answers fail
    for name in ("erin", "frank"):
        assert lines[name].startswith("10.1 FAIL  10.2 PASS"), lines[name]
        assert "step 0" in lines[name]
    assert done.returncode == 1  # bob and dave could not be graded
    assert "graded 5 of 7 learners; not graded: bob, dave" in done.stderr
    with gradebook.open(newline="") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    assert list(rows) == list(lines)
    assert rows["alice"]["10.1"] == "1" and rows["alice"]["total"] == rows["alice"]["possible"]
    assert rows["frank"]["10.1"] == "0" and rows["frank"]["10.2"] == "1"
    assert rows["bob"]["graded"] == "no" and rows["bob"]["10.1"] == ""
    assert rows["grace"]["notebook"].endswith("grace/notebooks/10_capstone.ipynb")
    assert float(rows["bob"]["seconds"]) < limit + 15  # the limit bounds the time


# ------------------------------------------------------------------ finding the learners
def test_learners_are_files_or_sub_folders_with_one_notebook(tmp_path):
    nb = _notebook("x = 1", {"1.1": "def f(): pass"})
    _write(tmp_path / "ann.ipynb", nb)
    _write(tmp_path / "ben" / "work" / "mine.ipynb", nb)
    _write(tmp_path / "ben" / ".ipynb_checkpoints" / "mine-checkpoint.ipynb", nb)
    _write(tmp_path / "cy" / "a.ipynb", nb)
    _write(tmp_path / "cy" / "b.ipynb", nb)
    (tmp_path / "dee").mkdir()
    _write(tmp_path / "ann" / "ann.ipynb", nb)  # a file and a folder of the same name
    found = {
        name: (p and p.relative_to(tmp_path), why) for name, p, why in learners(tmp_path, ["1.1"])
    }
    assert found["ann.ipynb"] == (Path("ann.ipynb"), None)
    assert found["ann/ann.ipynb"] == (Path("ann/ann.ipynb"), None)
    assert found["ben"] == (Path("ben/work/mine.ipynb"), None)  # checkpoints are skipped
    assert found["cy"][0] is None and "2 notebooks could be the one" in found["cy"][1]
    assert found["dee"] == (None, "no .ipynb file in the folder")
    assert learners(tmp_path / "ann.ipynb", ["1.1"]) == [("ann", tmp_path / "ann.ipynb", None)]
    with pytest.raises(FileNotFoundError, match="no .ipynb files"):
        learners(tmp_path / "dee", ["1.1"])


def test_a_learner_without_a_readable_notebook_is_a_line_and_exit_status_1(tmp_path, capsys):
    (tmp_path / "dee").mkdir()
    (tmp_path / "eve.ipynb").write_text("{ not json")
    assert grade_folder(tmp_path, {"1.1": ("f", _passes)}, gradebook=tmp_path / "g.csv") is False
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "dee: 1.1 ----  (not graded: no .ipynb file in the folder)"
    assert out[1].startswith("eve: 1.1 ----  (not graded: its notebook cannot be read")
    assert ",no,0,no .ipynb file" in (tmp_path / "g.csv").read_text()


# ------------------------------------------------------------------ the limits
def test_memory_held_by_any_process_of_the_learner_counts(tmp_path):
    grow = (  # a process the learner's cell starts: 400 MB, 20 MB at a time, then held
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import time\\nx = []\\nfor _ in range(20):\\n"
        "    x.append(bytearray(20 << 20)); time.sleep(0.1)\\ntime.sleep(60)'])"
    )
    path = _write(tmp_path / "x.ipynb", _notebook(grow, {"1.1": "f = 1"}))
    graded = grade_learner(path, {"1.1": ("f", _passes)}, limit=60, memory_gb=0.5)
    assert graded.stopped and "over its limit of 0.5 GB" in graded.stopped
    assert "running its first cell" in graded.stopped
    assert graded.seconds < 40  # stopped when it went over, not at the time limit


def test_an_exit_in_a_cell_fails_that_cell_and_os_exit_ends_only_that_learner(tmp_path):
    cells = {"1.1": "raise SystemExit(0)\ndef f(): pass", "1.2": "def g(): pass"}
    path = _write(tmp_path / "x.ipynb", _notebook("import os", cells))
    exercises = {"1.1": ("f", _passes), "1.2": ("g", _passes)}
    graded = grade_learner(path, exercises, limit=60)
    assert graded.stopped is None and not graded.results["1.1"] and graded.results["1.2"]
    assert "SystemExit: 0 (line 2: `raise SystemExit(0)`)" in graded.results["1.1"].message
    cells["1.2"] = "os._exit(3)"
    graded = grade_learner(_write(path, _notebook("import os", cells)), exercises, limit=60)
    assert graded.results == {}
    assert graded.stopped == (
        "its process exited with code 3 while running the cell of Exercise 1.2 "
        "(os._exit in the notebook's code?)"
    )


# ------------------------------------------------------------------ the ranks
def _run_on_ranks(answer, cluster, timeout) -> CheckResult:
    """A grader as the course's are: the answer runs on the ranks; errors explained here."""
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    try:
        values = cluster.run(answer)
    except (RankError, CollectiveTimeout) as err:
        return explain_failure(err, answer.__name__, timeout)
    ok = values == [0, 1]
    return CheckResult(ok, f"{PASS if ok else FAIL} {answer.__name__} returned {values}")


def test_answers_run_on_the_learners_ranks_and_their_failures_come_back(tmp_path):
    first = "import os\nimport torch\nimport torch.distributed as dist"
    cells = {
        "1.1": "def rank():\n    return dist.get_rank()",
        "1.2": "def boom():\n    if dist.get_rank() == 1:\n        raise ValueError('no')",
        "1.3": "def stuck():\n    if dist.get_rank() == 0:\n        dist.recv(torch.zeros(1), 1)",
        "1.4": "def gone():\n    if dist.get_rank() == 1:\n        os._exit(3)",
    }
    path = _write(tmp_path / "x.ipynb", _notebook(first, cells))
    names = {"1.1": "rank", "1.2": "boom", "1.3": "stuck", "1.4": "gone"}
    exercises = {e: (name, _run_on_ranks) for e, name in names.items()}
    graded = grade_learner(path, exercises, ranks=2, timeout=5, limit=120)
    assert graded.stopped is None, graded.stopped
    r = graded.results
    assert r["1.1"] and r["1.1"].message == f"{PASS} rank returned [0, 1]"
    assert "boom raised ValueError on rank 1: no" in r["1.2"].message
    assert "line 4 in boom" in r["1.2"].message  # the cell's line (1: its header)
    assert "did not finish within 5 s" in r["1.3"].message and "rank 0: line 4" in r["1.3"].message
    assert "rank 1" in r["1.4"].message and "exited with code 3" in r["1.4"].message


def test_the_learners_process_ends_with_the_grader(tmp_path):
    """An instructor's Ctrl-C, or a killed grader, leaves no learner's loop running."""
    import psutil

    path = _write(tmp_path / "x.ipynb", _notebook("while True:\n    pass", {"1.1": "f = 1"}))
    grader = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from labkit.room import grade_learner\n"
        "from labsupport.runtime.check import CheckResult\n"
        "grade_learner(Path(sys.argv[1]), {'1.1': ('f', lambda *a: CheckResult(True, ''))})"
    ), str(path)])  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not psutil.Process(grader.pid).children() and time.monotonic() < deadline:
            time.sleep(0.2)
        (learner,) = psutil.Process(grader.pid).children()
        time.sleep(2)
    finally:
        grader.kill()
        grader.wait()
    learner.wait(timeout=60)  # gone on its own, within its watch's second (after its imports)
