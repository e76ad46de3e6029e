"""How fast does a warm cluster recover from a failing cell, next to a cold start?

Measured side by side in one run on this machine, with ``--world-size`` ranks:

* cold: start a cluster and run one cell (``Cluster(...)`` + ``exec("pass")``),
  what a learner waits for when the ranks have to start from nothing;
* to error: a cell in which one rank raises while the others wait in a
  barrier, from the cell's start until the error reaches the notebook;
* to next cell: from that error until the next cell (``exec("pass")``) has
  completed on fresh ranks.

Two policies: ``standby`` (a spare group kept ready: the default from the
first failure on, and from the start with ``Cluster(standby=True)``), and
``first failure`` (a cluster's very first failure, when the replacement starts
at the moment of the error).

Targets (issue 8): the error in under a tenth of a cold start, the next cell
within a third of a cold start after the error.

    python benchmarks/recovery.py [--world-size 4] [--trials 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import labsupport as lab
from labsupport.runtime.scripts import common_options

FAILING_CELL = "if rank == 1:\n    raise ValueError('a deliberate failure')\ndist.barrier()"


def cold_start(world_size: int) -> float:
    """Seconds from nothing to one completed cell."""
    t0 = time.perf_counter()
    with lab.Cluster(world_size=world_size, standby=False) as cluster:
        cluster.exec("pass")
        return time.perf_counter() - t0


def one_failure(cluster: lab.Cluster) -> tuple[float, float]:
    """(seconds to the error, seconds from the error to the next cell done)."""
    t0 = time.perf_counter()
    try:
        cluster.exec(FAILING_CELL)
    except lab.RankError:
        pass
    else:
        raise AssertionError("the failing cell did not fail")
    t1 = time.perf_counter()
    cluster.exec("pass")
    return t1 - t0, time.perf_counter() - t1


def wait_for_standby(cluster: lab.Cluster) -> None:
    """Let the spare group finish starting, as it would while a learner reads."""
    if cluster._standby is not None:
        cluster._standby.wait_ready()


def main() -> None:
    """Time each way back after a failure; print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], parents=[common_options("ranks")]
    )
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    n = args.nproc

    cold = [cold_start(n) for _ in range(args.trials)]

    first = []
    for _ in range(args.trials):
        with lab.Cluster(world_size=n) as cluster:
            cluster.exec("pass")
            first.append(one_failure(cluster))

    standby = []
    with lab.Cluster(world_size=n, standby=True) as cluster:
        for _ in range(args.trials):
            wait_for_standby(cluster)
            cluster.exec("pass")
            standby.append(one_failure(cluster))

    c = statistics.median(cold)
    print(f"{n} {lab.detect_backend(n).backend} ranks, medians of {args.trials} trials")
    print(f"  cold start + one cell      {c:6.2f} s")
    rows = [("standby ready", standby), ("first failure", first)]
    print(f"  {'policy':<16}{'to error':>10}{'/cold':>8}{'to next cell':>14}{'/cold':>8}")
    for name, runs in rows:
        err = statistics.median(e for e, _ in runs)
        nxt = statistics.median(x for _, x in runs)
        print(f"  {name:<16}{err:9.2f}s{err / c:8.2f}{nxt:13.2f}s{nxt / c:8.2f}")
    print("  targets: to error / cold < 0.10; to next cell / cold < 0.33")


if __name__ == "__main__":
    main()
