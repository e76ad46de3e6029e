"""How fast does a warm cluster recover from a failing cell, next to a cold start?

Measured side by side in one run on this machine, with ``--world-size`` ranks:

* cold: start a cluster and run one cell (``Cluster(...)`` + ``exec("pass")``),
  what a learner waits for when the ranks have to start from nothing;
* to error: a cell in which one rank raises while the others wait in a
  barrier, from the cell's start until the error reaches the notebook;
* to next cell: from that error until the next cell (``exec("pass")``) has
  completed on fresh ranks.

Two policies: ``first failure`` (a cluster's very first failure, when the replacement
starts at the moment of the error), and ``standby`` (a spare group kept ready: the
default from the first failure on, and from the start with ``Cluster(standby=True)``).
Each trial starts one cluster with the default policy and times its start and first
cell (cold), its first failure, and then a second failure, with the spare the cluster
keeps from its first failure on. Where the default keeps no spare (more than 4 ranks),
the standby failure is timed on a ``Cluster(standby=True)``; where no spare can be kept
at all (NPUs and GPUs: one process per device, see ``lifecycle.standby_policy``), the
standby row says so.

Public calls only. The standby row wants the spare to have finished starting before
the failure, as it would have while a learner reads the last cell's output, but when
the spare is ready is not public (it is internal to the cluster's life cycle,
``labsupport.runtime.launch.lifecycle``). So: ``Cluster.standby_policy`` says whether
a spare is kept, and if so the trial pauses ``--pause`` seconds before the failure (by
default 1.5 x the trial's cold start: the spare starts while the current ranks are
idle, so it needs about one cold start). A spare still starting after the pause shows
as a "to next cell" of a sizeable fraction of a cold start, not as an error.

Targets (issue 8): the error in under a tenth of a cold start, the next cell
within a third of a cold start after the error.

    python benchmarks/recovery.py [--world-size 4] [--trials 3] [--pause SECONDS]
    python benchmarks/recovery.py --smoke   # 2 ranks, 1 trial, pause 1 x cold: does it run?
"""

from __future__ import annotations

import argparse
import statistics
import time

from labsupport.runtime.backend import detect_backend
from labsupport.runtime.launch import Cluster, RankError
from labsupport.runtime.launch.lifecycle import standby_policy
from labsupport.runtime.scripts import common_options

FAILING_CELL = "if rank == 1:\n    raise ValueError('a deliberate failure')\ndist.barrier()"

#: (seconds to the error, seconds from the error to the next cell done).
Failure = tuple[float, float]


def one_failure(cluster: Cluster) -> Failure:
    """(seconds to the error, seconds from the error to the next cell done)."""
    t0 = time.perf_counter()
    try:
        cluster.exec(FAILING_CELL)
    except RankError:
        pass
    else:
        raise AssertionError("the failing cell did not fail")
    t1 = time.perf_counter()
    cluster.exec("pass")
    return t1 - t0, time.perf_counter() - t1


def standby_failure(cluster: Cluster, pause: float) -> Failure | None:
    """A failure with the spare given ``pause`` seconds to start, as a learner's reading
    would; None if the cluster keeps no spare (``Cluster.standby_policy`` is not True)."""
    if not cluster.standby_policy:
        return None
    time.sleep(pause)
    cluster.exec("pass")
    return one_failure(cluster)


def trial(
    world_size: int, pause: float | None, factor: float
) -> tuple[float, Failure, Failure | None]:
    """(cold start + one cell, the first failure, a failure with the spare ready or None).

    ``pause``: seconds the spare gets to start; None: ``factor`` x this trial's cold start.
    """
    t0 = time.perf_counter()
    with Cluster(world_size=world_size) as cluster:
        cluster.exec("pass")
        cold = time.perf_counter() - t0
        first = one_failure(cluster)
        pause = factor * cold if pause is None else pause
        standby = standby_failure(cluster, pause)
        backend = cluster.backend
    if standby is None and standby_policy(True, backend, world_size):
        # the default keeps no spare for this group (more than 4 ranks): ask for one
        with Cluster(world_size=world_size, standby=True) as cluster:
            cluster.exec("pass")
            standby = standby_failure(cluster, pause)
    return cold, first, standby


def main(argv: list[str] | None = None) -> int:
    """Time each way back after a failure; print the table (exit status 0)."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], parents=[common_options("ranks")]
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument(
        "--pause",
        type=float,
        default=None,
        help="seconds the spare gets to start before a failure (default 1.5 x cold start)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2 ranks, 1 trial, pause 1 x cold start: check that it runs (no targets)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.nproc, args.trials = 2, 1
    if args.nproc < 2:
        parser.error("the failing cell needs at least 2 ranks (rank 1 raises)")
    n = args.nproc
    runs = [trial(n, args.pause, 1.0 if args.smoke else 1.5) for _ in range(args.trials)]

    c = statistics.median(cold for cold, _, _ in runs)
    pause = f"{args.pause:.2f} s" if args.pause is not None else "1.5 x cold start"
    if args.smoke and args.pause is None:
        pause = "1 x cold start (--smoke)"
    print(f"{n} {detect_backend(n).backend} ranks, medians of {args.trials} trials")
    print(f"  cold start + one cell      {c:6.2f} s")
    print(f"  the spare's time to start before a failure: {pause}")
    print(f"  {'policy':<16}{'to error':>10}{'/cold':>8}{'to next cell':>14}{'/cold':>8}")
    rows = {
        "standby ready": [s for _, _, s in runs if s is not None],
        "first failure": [f for _, f, _ in runs],
    }
    for name, failures in rows.items():
        if not failures:
            print(f"  {name:<16}  no spare group on this backend (one process per device)")
            continue
        err = statistics.median(e for e, _ in failures)
        nxt = statistics.median(x for _, x in failures)
        print(f"  {name:<16}{err:9.2f}s{err / c:8.2f}{nxt:13.2f}s{nxt / c:8.2f}")
    print("  targets: to error / cold < 0.10; to next cell / cold < 0.33")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
