"""Gradient compression on a slow emulated network: bytes per step and step time, one table.

On ``--nproc`` ranks (4) of one machine over the ``slow-ethernet`` preset of
``labsupport.netem`` (one NIC per rank, 1 ms per message, 50 MB/s), torch's DDP trains
notebook 08's MLP (3 layers of ``--hidden`` 512, 1.2 MB of float32 gradients, one
bucket) with each communication hook: none (``allreduce_hook``), fp16
(``fp16_compress_hook``), PowerSGD of rank 2 (``powerSGD_hook``) and top-k of 1 % with
error feedback (``labsupport.compress.topk_hook``, all-gathered (index, value) pairs).

For each it prints the bytes all ranks sent in one step, counted by netem (payload,
after ``--warmup`` steps: PowerSGD sends uncompressed for its first 2), the bytes from
the formula (``labsupport.compress.step_bytes``), the compression ratio and the median
step time (the slowest rank's; barrier before each step), measured in ``--rounds``
rounds that each run every method, so that a change in the machine's load hits all
alike. It exits with status 1 if any counted byte differs from the formula.

    python benchmarks/compression.py [--nproc 4] [--steps 5] [--rounds 2] [--network slow-ethernet]

Bytes are exact on any machine. Step times are not: the compute (a batch of 64 rows)
is real, and so is the emulator's own cost per message (about a millisecond on an idle
machine, several on a busy one), which adds to every collective. PowerSGD runs three
all-reduces per step and top-k two all-gathers, so on a latency-bound network the
fewest bytes need not give the fastest step. The load average is printed with the table.

Measured on a 2-core machine shared with other jobs (load average 14.6), defaults: bytes
equal to the formula for every method and step; median steps none 84.6 ms, fp16 42.9 ms
(1.97x), PowerSGD rank 2 58.5 ms (1.45x), top-k 1 % 53.8 ms (1.57x). Re-run on a quiet
machine before reading anything into the times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import labsupport as lab
from labsupport import compress, ddp

METHODS = {
    "none": ("none", {}),
    "fp16": ("fp16", {}),
    "PowerSGD r=2": ("powersgd", {"rank": 2}),
    "top-k 1 %": ("topk", {"ratio": 0.01}),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per method per round")
    ap.add_argument("--warmup", type=int, default=3, help="steps before counting (at least 3)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over all methods")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--network", default="slow-ethernet", help="a netem preset")
    args = ap.parse_args(argv)
    if args.warmup < 3:
        ap.error("--warmup must be at least 3 (DDP rebuilds its buckets at step 1, "
                 "PowerSGD compresses from step 2)")  # fmt: skip
    cfg = ddp.Config(in_features=64, hidden=args.hidden, layers=3, out_features=16, batch=64)
    seconds: dict[str, list[float]] = {label: [] for label in METHODS}
    counted: dict[str, set[int]] = {label: set() for label in METHODS}
    formula: dict[str, int] = {}
    with lab.Cluster(args.nproc, network=args.network, timeout=600) as cluster:
        cluster.run(ddp.use_threads)
        for _ in range(args.rounds):
            for label, (method, options) in METHODS.items():
                out = cluster.run(compress.train, method, args.warmup + args.steps, cfg, **options)
                result = out[0]
                seconds[label] += result["seconds"][args.warmup :]
                counted[label].update(result["bytes"][args.warmup :])
                formula[label] = compress.step_bytes(
                    method, result["shapes"], args.nproc, buckets=result["buckets"], **options
                )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.nproc} ranks, network {args.network}, {cfg.param_bytes() / 1e6:.2f} MB of "
        f"gradients; {args.rounds} rounds x {args.steps} steps; load average {load:.1f}"
    )
    print(f"{'method':>13} {'bytes/step counted':>19} {'formula':>10} {'ratio':>7} "
          f"{'median step':>12}")  # fmt: skip
    ok = True
    base_bytes = formula["none"]
    base_time = statistics.median(seconds["none"])
    for label in METHODS:
        exact = counted[label] == {formula[label]}
        ok &= exact
        shown = ", ".join(f"{c:,}" for c in sorted(counted[label]))
        t = statistics.median(seconds[label])
        flag = "" if exact else "  COUNTED != FORMULA"
        print(
            f"{label:>13} {shown:>19} {formula[label]:>10,} "
            f"{base_bytes / formula[label]:6.1f}x {t * 1e3:9.1f} ms"
            f"  ({base_time / t:.2f}x vs none){flag}"
        )
    print("counted bytes equal the formula for every method and step" if ok else
          "MISMATCH: some counted bytes differ from the formula")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
