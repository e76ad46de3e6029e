"""What judging overlap by time costs the DDP graders, on 2, 4 and 8 ranks.

    python benchmarks/overlap_grading.py [--ranks 2 4 8]
    python benchmarks/overlap_grading.py --smoke   # 2 ranks, notebook 07's first grader

For each size, on one group of ranks started on the graders' network
(:data:`labsupport.runtime.check.overlap_timing.NETWORK`), it grades the library's
solutions with the three DDP graders (07.1 ``check_overlapped``, 07.2 ``check_bucketed``,
10.1 ``check_ddp``) and one answer that hides nothing (every all-reduce issued from
backward's last gradient), and prints each grade's seconds beside the seconds of its
timed part alone (:func:`labsupport.runtime.check.overlap.timed_runs`), so the share the
timing adds is read off one run. A verdict other than the expected one fails the script.
The budget is about a minute per grader on 2 cores; the load average is printed (a
shared machine's seconds are not a quiet laptop's).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from labsupport import ddp


class AllAtEnd(ddp.Bucketed):
    """Every bucket, in order, issued from the hook of backward's last gradient: no overlap."""

    def prepare_for_backward(self) -> None:  # noqa: D102
        super().prepare_for_backward()
        self.pending: list = []

    def grad_ready(self, param) -> None:  # noqa: ANN001, D102
        self.pending.append(param)
        if len(self.pending) == len(self.params):
            for p in self.pending:
                super().grad_ready(p)


def _seconds(fn, *args) -> tuple[float, object]:  # noqa: ANN001, ANN002
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    """Grade on each size; print seconds per grade and per timed part."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--smoke", action="store_true", help="2 ranks, one grader: does it run")
    args = parser.parse_args(argv)
    from labsupport.runtime.check.capstone import check_ddp
    from labsupport.runtime.check.overlap import (
        BUCKET_CAPS,
        check_bucketed,
        check_overlapped,
        timed_runs,
    )
    from labsupport.runtime.check.overlap_timing import NETWORK
    from labsupport.runtime.experiments import ddp_runs
    from labsupport.runtime.launch import Cluster

    cases = [
        ("07.1", check_overlapped, ddp.Overlapped, None, True),
        ("07.2", check_bucketed, ddp.Bucketed, list(BUCKET_CAPS), True),
        ("10.1", check_ddp, ddp.Bucketed, list(BUCKET_CAPS), True),
        ("10.1", check_ddp, AllAtEnd, list(BUCKET_CAPS), False),
    ]
    if args.smoke:
        args.ranks, cases = [2], cases[:1]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    head = ("ranks", "grader", "answer", "verdict", "grade s", "timed s")
    print("{:>5}  {:<6} {:<12} {:<7} {:>8} {:>8}".format(*head))
    wrong = 0
    for world in args.ranks:
        with Cluster(world, network=NETWORK, timeout=args.timeout) as cluster:
            cluster.run(ddp_runs.use_threads)
            for exercise, grader, answer, caps, expect in cases:
                graded, result = _seconds(grader, answer, cluster, args.timeout)
                timed, _ = _seconds(timed_runs, cluster, answer, caps, "x", args.timeout)
                verdict = "PASS" if result else "FAIL"
                wrong += bool(result) != expect
                print(
                    f"{world:>5}  {exercise:<6} {answer.__name__:<12} {verdict:<7} "
                    f"{graded:>8.1f} {timed:>8.1f}",
                    flush=True,
                )
    print(f"load average after {os.getloadavg()[0]:.1f}; verdicts as expected: {wrong == 0}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
