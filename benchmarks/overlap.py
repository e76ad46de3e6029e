"""Overlap on an emulated network: step time of naive, flat, overlapped, bucketed and torch DDP.

On ``--nproc`` ranks (4) of one machine, over a ``labsupport.netem`` network chosen so
that communication is comparable to the backward pass: each rank has its own NIC
(``ranks_per_node=1``), latency ``--latency`` (200 µs), and a bandwidth computed
from the backward time measured first, so that a ring all-reduce of all gradients
takes ``--comm-ratio`` (1.0) times the backward pass. Then, in ``--rounds``
rounds that each run every version for ``--steps`` steps (so that a change in the
machine's load hits all versions alike), the median of the slowest rank's step
time (warm-up, barrier).

It prints bucketed against naive (target: at least 1.5× faster) and against the
ideal ``max(compute, communication)``, where compute is a step without any
communication (the same ranks, at the same time) and communication is the
bucketed step's all-reduces run back to back without compute (target: within
25 %). The CPU work is real, so a busy machine moves every number: the load
average is printed with the table.

    python benchmarks/overlap.py [--nproc 4] [--steps 3] [--rounds 3] [--bucket-mb 0.25]

The defaults (6 layers of 512, 4.8 MB of parameters, a global batch of 4096, buckets
of 0.25 MiB) make each step a few hundred milliseconds, so that the emulator's own
floor per message (about a millisecond on an idle machine, several on a busy one)
is small against the wire time.

Why the ratio is 1.0: only backward can hide communication C (forward F and the
optimizer O cannot), so bucketed vs naive is at most (F+B+O+C)/(F+B+O); with
B ≈ 2F that is about 1.5 at C = 0.8·B and 1.65 at C = B.

Measured on a 2-core machine shared with other jobs (load average 6 to 8; with
``--comm-ratio 0.8`` unless said), the results swing from run to run: once on 4
ranks bucketed was 1.85x faster than naive and 1.15x the ideal (both targets met);
in three later 4-rank runs 0.9x to 1.3x faster and 1.3x to 2.1x the ideal; on 2
ranks (ranks = cores) 1.28x faster and 1.05x the ideal, and with ratio 1.0 1.39x
and 1.74x. Compute with 4 ranks on 2 busy cores also has to share them with
the emulator's threads, which the ideal does not count. Run it on a quiet machine
with at least as many cores as ranks before reading anything into the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import labsupport as lab
from labsupport import costmodel, ddp, netem

VERSIONS = ("naive", "flat", "overlap", "bucket", "torch")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per version per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over all versions")
    ap.add_argument("--bucket-mb", type=float, default=0.25)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4096,
                    help="global batch (large: compute dwarfs the emulator floor)")  # fmt: skip
    ap.add_argument("--latency", type=float, default=200e-6, help="seconds per message")
    ap.add_argument("--comm-ratio", type=float, default=1.0,
                    help="all-reduce of all gradients / backward time")  # fmt: skip
    args = ap.parse_args(argv)
    cfg = ddp.Config(hidden=args.hidden, layers=args.layers, batch=args.batch)
    p, bucket_bytes = args.nproc, int(args.bucket_mb * 2**20)
    nbytes = cfg.param_bytes()
    # Start on a fast placeholder network, measure compute, then set the real one.
    fast = netem.Network(inter=netem.Link(10e-6, 10e9), ranks_per_node=1)
    with lab.Cluster(p, network=fast, timeout=300) as cluster:
        cluster.run(ddp.use_threads)
        compute = cluster.run(ddp.time_compute, args.steps, 2, cfg)[0]
        net = ddp.network_for(compute["backward"], nbytes, p, args.latency, args.comm_ratio)
        cluster.run(netem.set_network, net)
        sizes = ddp.bucket_bytes(ddp.make_model(cfg), bucket_bytes)
        # Rounds: every version (and compute, and communication alone) once per round, so
        # that a change in the machine's load during the run hits all of them alike.
        samples: dict[str, list[float]] = {name: [] for name in VERSIONS}
        computes, comms = [], []
        for _ in range(args.rounds):
            computes.append(cluster.run(ddp.time_compute, args.steps, 1, cfg)[0])
            comms.append(cluster.run(ddp.time_all_reduces, sizes, 2)[0])
            for name in VERSIONS:
                out = cluster.run(ddp.time_steps, name, args.steps, 1, cfg, bucket_bytes)
                samples[name] += out[0]["seconds"]
    times = {name: statistics.median(v) for name, v in samples.items()}
    compute = {k: statistics.median(c[k] for c in computes) for k in computes[0]}
    comm = statistics.median(comms)
    step_compute = sum(compute.values())
    ideal = max(step_compute, comm)
    model = costmodel.ring_allreduce(nbytes, p, net.inter.alpha, net.inter.beta)
    load = os.getloadavg()
    print(
        f"{p} ranks, {nbytes / 1e6:.1f} MB of parameters, buckets of {args.bucket_mb:g} MiB "
        f"({len(sizes)} buckets); network: {net}"
    )
    print(
        f"compute per step: forward {compute['forward'] * 1e3:.1f} ms, backward "
        f"{compute['backward'] * 1e3:.1f} ms, optimizer {compute['optimizer'] * 1e3:.1f} ms"
    )
    print(
        f"communication alone: {comm * 1e3:.1f} ms measured (ring model of one flat "
        f"all-reduce: {model * 1e3:.1f} ms)"
    )
    for name in VERSIONS:
        print(f"{name:>8}: {times[name] * 1e3:7.1f} ms per step")
    speedup = times["naive"] / times["bucket"]
    over = times["bucket"] / ideal
    print(f"bucketed vs naive: {speedup:.2f}x faster (target >= 1.5)")
    print(
        f"bucketed vs ideal max(compute, comm) = {ideal * 1e3:.1f} ms: {over:.2f}x (target <= 1.25)"
    )
    print(f"load average: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
