"""The schedule engine's ring all-reduce against the backend's own all_reduce, side by side.

Both run on the same tensor, in the same group, in alternating rounds (so a
busy machine slows both alike). Each round: warm-up calls, then timed calls
(labsupport.runtime.bench's timing: device sync, barrier, back-to-back iterations);
a round's time is the slowest rank's; each algorithm keeps its best round.
busbw = size / time * 2(p-1)/p, as nccl-tests reports it.

It also times what must stay interactive: costing and animating the schedule
of a 1024-rank ring (each should take under a second).

    .venv/bin/python benchmarks/ring_allreduce.py              # 4 ranks, 16 MiB
    .venv/bin/python benchmarks/ring_allreduce.py --ranks 8 --mib 64
    .venv/bin/python benchmarks/ring_allreduce.py --smoke   # 2 ranks, 1 MiB: does it run?

The target on 4 ranks, gloo, CPU: the ring reaches at least 60% of
dist.all_reduce's busbw. The script prints the ratio; it does not assert it.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable


def _side_by_side(mib: int, iters: int, warmup: int, rounds: int) -> dict[str, float]:
    """On every rank: best-of-rounds seconds per call for the engine's ring and dist.all_reduce."""
    import torch
    import torch.distributed as dist

    from labsupport.runtime.bench.core import this_device, time_case
    from labsupport.schedules import execute, ring_all_reduce

    device = this_device()
    x = torch.zeros(mib * 2**20 // 4, dtype=torch.float32, device=device)
    ring = ring_all_reduce(dist.get_world_size())
    calls = {"engine ring": lambda: execute(ring, x), "dist.all_reduce": lambda: dist.all_reduce(x)}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(rounds):
        for name, call in calls.items():
            for _ in range(warmup):
                call()
            mine, _ = time_case(call, iters, device)
            slowest = torch.tensor([mine], dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            best[name] = min(best[name], slowest.item())
    return best


def _interactive_timings(p: int = 1024) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds to build+cost and to build+animate (first frame) a p-rank ring.

    CPU time is printed too: on a shared machine the wall time also counts
    time spent waiting for a core.
    """
    import ipywidgets  # noqa: F401 - imported before the clock starts, as in a notebook
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    from labsupport.costmodel import cost
    from labsupport.runtime.viz.schedule import animate_schedule
    from labsupport.schedules import ring_all_reduce

    def clock(work: Callable[[], object]) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        return time.perf_counter() - wall, time.process_time() - cpu

    return {
        f"cost a {p}-rank ring": clock(
            lambda: cost(ring_all_reduce(p), 16 * 2**20).time(alpha=5e-6, beta=1e-10)
        ),
        f"animate a {p}-rank ring": clock(lambda: animate_schedule(ring_all_reduce(p))),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mib", type=int, default=16, help="tensor size in MiB (float32)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2 ranks, 1 MiB, 1 round of 2 calls after 1 warm-up: check that it runs",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.ranks, args.mib, args.iters, args.warmup, args.rounds = 2, 1, 2, 1, 1

    import labsupport as lab
    from labsupport.costmodel import busbw_factor

    cores = os.cpu_count() or 1
    if args.ranks > cores:
        print(
            f"note: {args.ranks} ranks on {cores} cores: ranks wait for a core, so the times "
            "below include the scheduler; use --ranks <= cores for numbers worth comparing"
        )

    with lab.Cluster(args.ranks, backend=args.backend, timeout=600) as cluster:
        best = cluster.run(_side_by_side, args.mib, args.iters, args.warmup, args.rounds)[0]
    nbytes = args.mib * 2**20
    factor = busbw_factor("all_reduce", args.ranks)
    print(
        f"all_reduce of {args.mib} MiB float32 on {args.ranks} ranks ({args.backend}), "
        f"best of {args.rounds} rounds of {args.iters} calls, slowest rank"
    )
    print(f"{'algorithm':<18}{'time (ms)':>12}{'algbw (GB/s)':>15}{'busbw (GB/s)':>15}")
    busbw = {}
    for name, seconds in best.items():
        busbw[name] = nbytes / seconds / 1e9 * factor
        algbw = nbytes / seconds / 1e9
        print(f"{name:<18}{seconds * 1e3:>12.2f}{algbw:>15.3f}{busbw[name]:>15.3f}")
    ratio = busbw["engine ring"] / busbw["dist.all_reduce"]
    print(f"ratio engine ring / dist.all_reduce busbw: {ratio:.2f} (target >= 0.60)")

    for what, (wall, cpu) in _interactive_timings().items():
        print(f"{what}: {wall:.2f} s wall, {cpu:.2f} s CPU (target < 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
