"""Does the emulated network give the link model's times, on a quiet machine and a busy one?

For each all-reduce algorithm, on 4 ranks over the "slow-ethernet" preset (1 ms,
50 MB/s, one NIC per rank), at 4 KiB, 64 KiB, 1 MiB and 16 MiB: the time the
slowest rank measures (``--warmup`` untimed calls, then ``--iters`` calls each
timed from a barrier, as :func:`labsupport.runtime.bench.timing.time_iterations` does;
the median) over the model: the link model's time for the algorithm's schedule
(:func:`labsupport.netem.model_time`, which on this one-port network equals the
α-β closed forms of :mod:`labsupport.costmodel`; tests/core/test_netem.py checks it,
column "links ms") plus the CPU time the ranks measured in that call, the slowest
rank's: the collective's reductions (the γ term, :func:`labsupport.runtime.emulator.traffic`'s
``reduce_seconds``) and what the rank's own thread was charged
(:func:`labsupport.runtime.emulator.clock.cpu_charged`: the benchmark's own bookkeeping, since
torch.distributed's Python is not charged, see :mod:`labsupport.runtime.emulator.calls`;
column "call µs"). The ratio is the median over calls.

The table shows two quiet runs and one with ``--load N`` busy processes beside the
ranks (``while True: pass``, started for that run and stopped after it):

    python benchmarks/netem_fidelity.py [--nproc 4] [--load 2] [--iters 9] [--network NAME]
    python benchmarks/netem_fidelity.py --smoke   # 2 ranks, 4 and 64 KiB, one quiet run

``--load 0`` skips the loaded run. ``--smoke`` only checks that the script runs end to end
(seconds): one quiet run of 2 calls per case at the two smallest sizes, no target checked.

**What this checks.** The emulator now *implements* the model: each rank reads an
emulated clock (:mod:`labsupport.runtime.emulator.clock`) on which messages cost what their
link says, queue behind each other on a busy link or NIC, and chain step by step.
So a ratio of 1 means the emulation is faithful (queues and chaining included), not
that a real network behaves so. CPU time is the one input that moves when the
machine is busy (a busy sibling core slows a thread's own instructions): it is
measured and counted, never hidden. Waiting for a core costs nothing on the
emulated clock, so the loaded column matches the quiet ones. Targets: every
ratio within 1 ± 0.03, quiet and loaded; the two quiet runs within 1 % of each
other. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import labsupport as lab
from labsupport import netem
from labsupport.runtime.scripts import common_options

SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20)


def measure(sizes: tuple[int, ...], algorithms: tuple[str, ...], iters: int, warmup: int) -> dict:
    """On every rank: {(algorithm, size): (seconds, reduce CPU s, call CPU s) per timed call}.

    Each is the slowest rank's: the call's time, the CPU time its reductions took
    (a step's reduction delays the next step, so the path through the slowest
    reductions sets the end), and the CPU time the rank's own thread was charged
    during the call.
    """
    import torch
    import torch.distributed as dist

    from labsupport.runtime import emulator
    from labsupport.runtime.bench.timing import slowest, time_iterations

    out = {}
    for algorithm in algorithms:
        emulator.set_algorithm(algorithm)
        for size in sizes:
            x = torch.ones(size // 4)
            reduce: list[float] = []
            host: list[float] = []

            def step(i: int, x: torch.Tensor = x, reduce: list = reduce, host: list = host) -> None:
                before = (emulator.traffic()["reduce_seconds"], emulator.clock.cpu_charged())
                dist.all_reduce(x)
                if i >= warmup:
                    reduce.append(emulator.traffic()["reduce_seconds"] - before[0])
                    host.append(emulator.clock.cpu_charged() - before[1])

            timing = time_iterations(step, iters, warmup=warmup)
            calls = zip(timing.seconds, slowest(reduce), slowest(host), strict=True)
            out[(algorithm, size)] = list(calls)
    return out


@contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` processes that spin on a core each, for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def run(
    args: argparse.Namespace,
    net: netem.Network,
    algorithms: tuple[str, ...],
    sizes: tuple[int, ...] = SIZES,
) -> dict:
    """One pass: {(algorithm, size): (measured / model, the call's own CPU µs)}."""
    with lab.Cluster(args.nproc, network=net, timeout=600) as cluster:
        times = cluster.run(measure, sizes, algorithms, args.iters, args.warmup)[0]
    out = {}
    for (algorithm, size), calls in times.items():
        links = netem.model_time("all_reduce", algorithm, size, args.nproc, net)
        ratio = statistics.median(t / (links + reduce + host) for t, reduce, host in calls)
        out[(algorithm, size)] = (ratio, statistics.median(c[2] for c in calls) * 1e6)
    return out


def main(argv: list[str] | None = None) -> bool:
    """Print the table; return whether every target holds."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        parents=[common_options("ranks", "network", network="slow-ethernet")],
    )
    parser.add_argument("--iters", type=int, default=9, help="timed calls per case")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per case first")
    parser.add_argument(
        "--load", type=int, default=2, help="busy processes in the loaded run (0: no loaded run)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2 ranks, 4 and 64 KiB, 2 calls per case, one quiet run: check that it runs",
    )
    args = parser.parse_args(argv)
    sizes = SIZES
    if args.smoke:
        args.nproc, args.iters, args.warmup, args.load, sizes = 2, 2, 1, 0, SIZES[:2]
    net = netem.PRESETS[args.network]
    two_level = ("hierarchical", "hierarchical_ring", "hierarchical_hd")
    algorithms = tuple(a for a in netem.ALGORITHMS if a not in two_level or net.ranks_per_node)
    print(f"{args.nproc} ranks on {os.cpu_count()} cores; network {args.network} ({net})")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    passes = {"quiet": run(args, net, algorithms, sizes)}
    if not args.smoke:
        passes["again"] = run(args, net, algorithms, sizes)
    if args.load > 0:
        with busy(args.load):
            passes[f"load +{args.load}"] = run(args, net, algorithms, sizes)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    head = f"{'algorithm':>20} {'size':>9} {'links ms':>9} {'call µs':>8} "
    for name in passes:  # a loaded run also shows its own CPU µs
        head += f" {name:>8}" + (f" {'call µs':>8}" if name.startswith("load") else "")
    print(head)
    first = passes["quiet"]
    for key, (_, host) in first.items():
        algorithm, size = key
        links = netem.model_time("all_reduce", algorithm, size, args.nproc, net) * 1e3
        row = f"{algorithm:>20} {size:>9} {links:9.2f} {host:8.0f} "
        for name, table in passes.items():
            ratio, host = table[key]
            row += f" {ratio:8.3f}" + (f" {host:8.0f}" if name.startswith("load") else "")
        print(row)
    ratios = [r for table in passes.values() for r, _ in table.values()]
    worst = max(ratios, key=lambda r: abs(r - 1))
    if "again" in passes:
        drift = max(abs(passes["again"][k][0] / first[k][0] - 1) for k in first)
        drift_words = f"quiet runs differ by {drift:.2%} at most"
    else:
        drift, drift_words = 0.0, "one quiet run"
    target = "not checked: --smoke" if args.smoke else "target 1 ± 0.03"
    print(f"worst ratio {worst:.3f} ({target}); {drift_words}")
    return args.smoke or (abs(worst - 1) <= 0.03 and drift <= 0.01)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
