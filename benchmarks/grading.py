"""What a fresh group of ranks per learner costs the folder grader, against one shared group.

    python benchmarks/grading.py [--learners 3] [--ranks 4]

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
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared(paths: list[Path], ranks: int, timeout: float) -> float:
    """Seconds per learner, every learner graded in this process on one group of ranks."""
    from labkit.notebooks import grade_answers, load_answers

    from labsupport.runtime.check.capstone import EXERCISES
    from labsupport.runtime.launch import Cluster

    start = time.perf_counter()
    with Cluster(ranks, backend="gloo", timeout=timeout, standby=False) as cluster:
        for path in paths:
            namespace, problems = load_answers(path, list(EXERCISES))
            answers = {
                e: namespace[name] for e, (name, _) in EXERCISES.items() if name in namespace
            }
            results = grade_answers(answers, problems, EXERCISES, cluster, timeout)
            assert all(results.values()), results
    return (time.perf_counter() - start) / len(paths)


def fresh(paths: list[Path], ranks: int, timeout: float) -> float:
    """Seconds per learner, each in a process of its own with its own ranks."""
    from labkit.room import grade_learner

    from labsupport.runtime.check.capstone import EXERCISES

    start, peak = time.perf_counter(), 0
    for path in paths:
        graded = grade_learner(path, EXERCISES, ranks, timeout, limit=600)
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
    args = parser.parse_args(argv)
    solution = (ROOT / "notebooks" / "solutions" / "10_capstone.ipynb").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp, f"learner{i}.ipynb") for i in range(args.learners)]
        for path in paths:
            path.write_text(solution)
        load = os.getloadavg()[0]
        one = shared(paths, args.nproc, args.timeout)
        own = fresh(paths, args.nproc, args.timeout)
    print(
        f"{args.learners} learners, {args.nproc} ranks, {os.cpu_count()} cores: shared group "
        f"{one:.1f} s per learner, fresh group per learner {own:.1f} s per learner: "
        f"{own / one:.2f}x (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
