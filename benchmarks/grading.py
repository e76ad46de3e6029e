"""What a fresh group of ranks per learner costs the folder grader, against one shared group.

    python benchmarks/grading.py [--learners 3] [--ranks 4]
    python benchmarks/grading.py --smoke   # 1 learner, 2 ranks, a stand-in grader: does it run?

Grades copies of the capstone's solution notebook twice, side by side in one run:

* **shared**: the old way, all in this process on one group of ranks started once
  (``load_answers`` then the graders; no isolation: a learner's patch or exit would
  reach every later learner);
* **fresh**: ``labkit.room.grade_learner``, each learner in a process of its
  own with its own ranks (what ``python -m labkit.capstone grade`` does).

Prints seconds per learner for each and their ratio, and the load average (a shared
machine's seconds are not a quiet laptop's). The target is about a minute per learner
with 4 ranks on a 2-core laptop.

Measured on the course's 2-core test machine while other jobs shared it (load average
15 before, 11 after), 3 learners, 4 ranks: shared group 11.6 s per learner, a fresh
group per learner 33.9 s per learner (2.92x), each learner's processes holding at most
1.61 GB resident (summed RSS). The difference is each learner's start-up: its own
Python with torch, and 4 ranks importing torch, where the shared group pays once.

``--smoke`` grades 1 learner on 2 ranks both ways with a stand-in grader for each
exercise (:func:`smoke_grader`: the learner's class reaches every rank and says its name
there) instead of the capstone's graders, whose first call costs the ranks many seconds
of imports: it checks that the script runs end to end, in seconds; its times show each
way's start-up, not a grading.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labkit.answers import Exercises

    from labsupport.runtime.check.messages import CheckResult

ROOT = Path(__file__).resolve().parents[1]


def smoke_grader(answer: Any, cluster: Any, timeout: float) -> CheckResult:
    """The ``--smoke`` grader: the answer reaches every rank and gives its name there."""
    from labsupport.runtime.check.messages import FAIL, PASS, CheckResult

    names = cluster.call(getattr, (answer, "__name__"), timeout=timeout)  # builtin: by reference
    passed = len(set(names)) == 1
    return CheckResult(passed, f"{PASS if passed else FAIL} {names} on {len(names)} ranks")


def shared(paths: list[Path], ranks: int, timeout: float, exercises: Exercises) -> float:
    """Seconds per learner, every learner graded in this process on one group of ranks."""
    from labkit.answers import grade_answers, load_answers

    from labsupport.runtime.launch import Cluster

    start = time.perf_counter()
    with Cluster(ranks, backend="gloo", timeout=timeout, standby=False) as cluster:
        for path in paths:
            namespace, problems = load_answers(path, list(exercises))
            answers = {
                e: namespace[name] for e, (name, _) in exercises.items() if name in namespace
            }
            results = grade_answers(answers, problems, exercises, cluster, timeout)
            assert all(results.values()), results
    return (time.perf_counter() - start) / len(paths)


def fresh(paths: list[Path], ranks: int, timeout: float, exercises: Exercises) -> float:
    """Seconds per learner, each in a process of its own with its own ranks."""
    from labkit.room import grade_learner

    start, peak = time.perf_counter(), 0
    for path in paths:
        graded = grade_learner(path, exercises, ranks, timeout, limit=600)
        assert graded.stopped is None and all(graded.results.values()), graded
        peak = max(peak, graded.peak_bytes)
    print(f"fresh: at most {peak / 2**30:.2f} GB resident (its process and ranks, summed)")
    return (time.perf_counter() - start) / len(paths)


def main(argv: list[str] | None = None) -> int:
    """Grade the same folder both ways; print the two times side by side."""
    from labsupport.runtime.scripts import common_options

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], parents=[common_options("ranks")]
    )
    parser.add_argument("--learners", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="1 learner, 2 ranks, a stand-in grader per exercise: check that it runs",
    )
    args = parser.parse_args(argv)
    from labsupport.runtime.check.capstone import EXERCISES

    exercises = EXERCISES
    if args.smoke:
        args.learners, args.nproc = 1, 2
        exercises = {e: (name, smoke_grader) for e, (name, _) in EXERCISES.items()}
    solution = (ROOT / "notebooks" / "solutions" / "10_capstone.ipynb").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp, f"learner{i}.ipynb") for i in range(args.learners)]
        for path in paths:
            path.write_text(solution)
        load = os.getloadavg()[0]
        one = shared(paths, args.nproc, args.timeout, exercises)
        own = fresh(paths, args.nproc, args.timeout, exercises)
    print(
        f"{args.learners} learners, {args.nproc} ranks, {os.cpu_count()} cores: shared group "
        f"{one:.1f} s per learner, fresh group per learner {own:.1f} s per learner: "
        f"{own / one:.2f}x (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
