"""How faithful is the emulated network? Measured time over modelled time, per algorithm.

For each all-reduce algorithm, on 4 ranks over the "slow-ethernet" preset (1 ms,
50 MB/s, one NIC per rank), at 64 KiB, 1 MiB and 16 MiB: the time the slowest
rank measures (``--warmup`` calls, then ``--iters`` times: barrier, one timed call; the
median over those, which a shared machine's outliers move less) over the time the
link model predicts (:func:`labsupport.netem.model_time`, equal to the α-β
closed forms of :mod:`labsupport.costmodel` here). One table, worst ratio last.

    python benchmarks/netem_fidelity.py [--nproc 4] [--iters 15] [--warmup 3] [--network NAME]

The target is a ratio within 1 ± 0.15. The machine's load matters (the CPU
work is real): the script prints ``os.getloadavg()`` with the table. With one
rank per node (slow-ethernet), "hierarchical" runs exactly the ring's steps
(no intra-node phase; tests/test_netem.py checks it), so any gap between the
two rows is noise.

What is not hidden at small sizes (see ``labsupport.netem``): each step's host
work (Python, gloo over loopback, two thread wake-ups on the receiver) is hidden
only while it is shorter than the step's wire time. A rank that wakes late from
a wait (four ranks waking at once on two cores) starts its next operation at
its emulated time, not at its late real time (``netem.work.emulated_now``), but
the wall clock the benchmark reads still sees the last wake-up at the end. On a
busy machine (load above the core count) wake-ups take milliseconds and
dominate the 64 KiB rows: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import labsupport as lab
from labsupport import netem

SIZES = (64 << 10, 1 << 20, 16 << 20)


def measure(sizes: tuple[int, ...], algorithms: tuple[str, ...], iters: int, warmup: int) -> dict:
    """On every rank: {(algorithm, size): median over iterations of the slowest rank's time}."""
    import statistics

    import torch
    import torch.distributed as dist

    from labsupport import netem

    times = {}
    for algorithm in algorithms:
        netem.set_algorithm(algorithm)
        for size in sizes:
            x = torch.ones(size // 4)
            for _ in range(warmup):
                dist.all_reduce(x)
            samples = []
            for _ in range(iters if size <= 1 << 20 else max(3, iters // 3)):
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(x)
                elapsed = torch.tensor([time.perf_counter() - start])
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                samples.append(float(elapsed))
            times[(algorithm, size)] = statistics.median(samples)
    return times


def main(argv: list[str] | None = None) -> float:
    """Print the table; return the worst ratio's distance from 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument(
        "--iters", type=int, default=15, help="timed calls per case (a third of it at 16 MiB)"
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per case first")
    parser.add_argument("--network", default="slow-ethernet", choices=sorted(netem.PRESETS))
    args = parser.parse_args(argv)
    net = netem.PRESETS[args.network]
    two_level = ("hierarchical", "hierarchical_ring")
    algorithms = tuple(a for a in netem.ALGORITHMS if a not in two_level or net.ranks_per_node)
    print(f"load average before: {os.getloadavg()}; {args.nproc} ranks on {os.cpu_count()} cores")
    print(f"network: {args.network} ({net})")
    with lab.Cluster(args.nproc, network=net, timeout=600) as cluster:
        times = cluster.run(measure, SIZES, algorithms, args.iters, args.warmup)[0]
    rows = []
    for (algorithm, size), measured in times.items():
        model = netem.model_time("all_reduce", algorithm, size, args.nproc, net)
        rows.append((algorithm, size, measured, model, measured / model))
    print(f"{'algorithm':>20} {'size':>10} {'measured ms':>12} {'model ms':>10} {'ratio':>7}")
    for algorithm, size, measured, model, ratio in rows:
        print(f"{algorithm:>20} {size:>10} {measured * 1e3:12.2f} {model * 1e3:10.2f} {ratio:7.3f}")
    worst = max(rows, key=lambda r: abs(r[4] - 1))
    print(f"load average after: {os.getloadavg()}")
    print(f"worst ratio: {worst[4]:.3f} ({worst[0]}, {worst[1]} bytes)")
    return abs(worst[4] - 1)


if __name__ == "__main__":
    sys.exit(0 if main() <= 0.15 else 1)
