"""Data-parallel training by hand under torchrun: naive, flat, overlapped, bucketed, torch, ZeRO-1.

The same versions as notebook 07 (``labsupport.ddp``: ``nn.Module`` wrappers built like
torch's DistributedDataParallel, and ZeRO-1 as an optimizer), on a real cluster or on
one machine::

    torchrun --nproc_per_node=4 examples/ddp_overlap.py --version bucket --bucket-mb 1
    torchrun --standalone --nproc_per_node=2 examples/ddp_overlap.py --version overlap \
        --network slow-ethernet          # on the emulated network of labsupport.netem

Each rank uses its own device: ``--backend auto`` (the default) picks hccl on Ascend
NPUs, nccl on CUDA GPUs (one device per local rank, ``LOCAL_RANK``), else gloo on the
CPU; the model, the batches and the timing buffers live on that device. Each step:
synchronize, barrier, synchronize, the step, synchronize, then the clock; the slowest
rank's time (all_reduce MAX), after ``--warmup`` untimed steps. Rank 0 prints one line
per step and the median. The model is the course's MLP (``--hidden``, ``--layers``
change its size); threads per rank are set to cores // ranks on the host
(LOCAL_WORLD_SIZE), one on an emulated network. ``--network`` emulates a network over
gloo, on the CPU.
``--bucket-mb`` is torch's ``bucket_cap_mb`` (MiB; ``default``: torch's 25 MiB with a
1 MiB first bucket). ``--check`` also trains the same model in float64 next to one
process, on every rank, and says whether every step matched, element by element.

The NPU and GPU paths were not run on real hardware (there was none where this was
written); they use the same documented calls as ``labsupport.runtime.bench`` (``set_device``,
``synchronize``), and tests/core/test_ddp.py checks the device choice with fakes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics

import torch
import torch.distributed as dist

from labsupport import ddp
from labsupport.runtime import capstone
from labsupport.runtime.backend import rank_device
from labsupport.runtime.experiments import ddp_runs, workload
from labsupport.runtime.scripts import common_options, exit_now, join_group


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (``--bucket-mb`` becomes a number or None)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], parents=[common_options("backend", "network")]
    )
    p.add_argument("--version", choices=list(ddp_runs.VERSIONS), default="bucket")
    p.add_argument(
        "--bucket-mb", default="1", help="bucket_cap_mb in MiB, or 'default' (bucket, torch)"
    )
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=64, help="global batch (a multiple of ranks)")
    p.add_argument(
        "--check", action="store_true", help="compare with one process, step by step, in float64"
    )
    args = p.parse_args(argv)
    try:
        args.bucket_mb = None if args.bucket_mb == "default" else float(args.bucket_mb)
        ddp.bucket_caps(args.bucket_mb)
    except ValueError as err:
        p.error(f"--bucket-mb: {err}")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """Time the version on this rank; rank 0 prints. Exit 1 if ``--check`` found a difference."""
    args = parse(argv)
    join_group("ddp_overlap", args.backend, args.network)  # sets the rank's npu/cuda device
    try:
        ddp_runs.use_threads(int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size())))
        cfg = workload.Config(hidden=args.hidden, layers=args.layers, batch=args.batch)
        cap = args.bucket_mb
        out = ddp_runs.time_steps(args.version, cfg, args.steps, args.warmup, bucket_cap_mb=cap)
        found = None
        if args.check:
            exact = dataclasses.replace(cfg, dtype=torch.float64)
            mine = capstone.compare_steps(args.version, exact, 3, bucket_cap_mb=cap)
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, mine)
            found = capstone.first_divergence(everyone)
        if dist.get_rank() == 0:
            mb = cfg.param_bytes() / 1e6
            where = f"{dist.get_backend()} on {rank_device()}"
            print(
                f"{args.version}: {dist.get_world_size()} ranks ({where}), "
                f"{mb:.1f} MB of parameters, "
                f"{out['calls_per_step']:g} collective calls per step"
            )
            for i, s in enumerate(out["seconds"]):
                print(f"step {i}: {s * 1e3:.1f} ms (slowest rank)")
            print(f"median step: {statistics.median(out['seconds']) * 1e3:.1f} ms")
            if args.check and found is None:
                print("same as one process at every step (float64, element by element)")
            elif args.check:
                from labsupport.runtime.check.ddp_judge import describe

                print("DIFFERS from one process: " + describe(found, dist.get_world_size(), 3))
        dist.barrier()  # every rank done before any tears its group down (not after an error)
        if found is not None:
            return 1
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_now(main())  # after destroy_process_group: see exit_now's docstring
