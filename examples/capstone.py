"""The capstone's training under torchrun: a tiny transformer, bucketed DDP, ZeRO-1 or torch DDP.

The same functions as notebook 10 (``labsupport.ddp`` with the capstone's
``GPTConfig``), on a real cluster or on one machine::

    torchrun --nproc_per_node=4 examples/capstone.py --strategy bucket --bucket-mb 0.25
    torchrun --standalone --nproc_per_node=2 examples/capstone.py --strategy zero1 --check
    torchrun --standalone --nproc_per_node=4 examples/capstone.py --strategy torch \\
        --network slow-ethernet        # on the emulated network of labsupport.netem

It trains ``--steps`` steps and prints the global batch's loss at each, then times
``--timed`` more steps (warm-up, barrier, device synchronize, the slowest rank), and
prints the model states each rank holds (and, on an emulated network, the bytes each
rank sent per step). ``--check`` also trains the same model in float64 next to one
process on every rank and says whether the two agree at every step, element by
element, or where they first differ. Strategies: the ``labsupport.ddp`` versions
(``bucket``, ``torch``, ``overlap``, ...), ``zero1`` (ZeRO-1 with a plain model) and
``bucket+zero1`` (ZeRO-1 under the bucketed wrapper: the same numbers, more traffic).
Each rank uses ``labsupport.runtime.backend.rank_device()`` (LOCAL_RANK's NPU or GPU with hccl
or nccl, else the CPU) and cores // LOCAL_WORLD_SIZE threads (one on an emulated
network); the NPU and GPU paths were not run on real hardware.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

import torch
import torch.distributed as dist

from labsupport import ddp
from labsupport.runtime import capstone
from labsupport.runtime.backend import rank_device
from labsupport.runtime.device import device_module
from labsupport.runtime.experiments import ddp_runs
from labsupport.runtime.scripts import common_options, exit_now, join_group

STRATEGIES = [*ddp_runs.VERSIONS, "bucket+zero1"]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (``--bucket-mb`` becomes a number or None)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], parents=[common_options("backend", "network")]
    )
    p.add_argument("--strategy", choices=STRATEGIES, default="bucket")
    p.add_argument(
        "--bucket-mb", default="0.25", help="bucket_cap_mb in MiB, or 'default' (torch's 25 MiB)"
    )
    p.add_argument("--steps", type=int, default=20, help="training steps (losses printed)")
    p.add_argument("--timed", type=int, default=5, help="timed steps after them")
    p.add_argument("--d-model", type=int, default=capstone.GPTConfig.d_model)
    p.add_argument("--layers", type=int, default=capstone.GPTConfig.layers)
    p.add_argument(
        "--batch",
        type=int,
        default=capstone.GPTConfig.batch,
        help="global batch in sequences (a multiple of the ranks)",
    )
    p.add_argument(
        "--check", action="store_true", help="compare with one process, step by step, in float64"
    )
    args = p.parse_args(argv)
    try:
        args.bucket_mb = None if args.bucket_mb == "default" else float(args.bucket_mb)
        ddp.bucket_caps(args.bucket_mb)
    except ValueError as err:
        p.error(f"--bucket-mb: {err}")
    if args.steps < 1 or args.timed < 1:
        p.error("--steps and --timed must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Train on this rank; rank 0 prints the report. Exit 1 if ``--check`` found a difference."""
    args = parse(argv)
    join_group("capstone", args.backend, args.network)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        module = device_module(rank_device())  # None on the CPU; torch.npu / torch.cuda
        if module is not None:
            module.set_device(rank_device())  # one device per rank (LOCAL_RANK)
        ddp_runs.use_threads(int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        cfg = capstone.GPTConfig(d_model=args.d_model, layers=args.layers, batch=args.batch)
        strategy = tuple(args.strategy.split("+")) if "+" in args.strategy else args.strategy
        cap = {"bucket_cap_mb": args.bucket_mb}
        out = ddp_runs.train(strategy, cfg, args.steps, **cap)
        timed = ddp_runs.time_steps(strategy, cfg, args.timed, 2, **cap)
        sent = ddp_runs.traffic_per_step(strategy, cfg, 2, **cap)
        found = None
        if args.check:
            exact = dataclasses.replace(cfg, dtype=torch.float64)
            mine = capstone.compare_steps(strategy, exact, min(args.steps, 5), **cap)
            everyone = [None] * world
            dist.all_gather_object(everyone, mine)
            found = capstone.first_divergence(everyone)
        if rank == 0:
            report(args, cfg, out, timed, sent, found, world)
    finally:
        dist.destroy_process_group()
    return 1 if args.check and found is not None else 0


def report(args, cfg, out, timed, sent, found, world) -> None:  # noqa: ANN001 - a printout
    """Rank 0 prints what the ranks measured."""
    print(
        f"{args.strategy}: {world} ranks on {rank_device()}, "
        f"{cfg.param_bytes() / 1e6:.2f} MB of parameters, global batch {cfg.batch}"
    )
    for i, loss in enumerate(out["losses"]):
        print(f"step {i}: loss {loss:.4f}")
    print(f"median step: {timed['median'] * 1e3:.1f} ms (slowest rank, {args.timed} steps)")
    print(
        "model states on rank 0: "
        + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in out["memory"].items())
    )
    if sent is not None:
        print(f"sent per step on the emulated network (rank 0): {sent / 1e6:.2f} MB")
    if args.check and found is None:
        print(
            "same as one process at every step (float64: losses, gradients, optimizer "
            "state, weights, element by element)"
        )
    elif args.check:
        from labsupport.runtime.check.ddp_judge import describe

        steps = min(args.steps, 5)
        print(
            "DIFFERS from one process: " + describe(found, world, steps, "zero1" in args.strategy)
        )


if __name__ == "__main__":
    exit_now(main())  # after destroy_process_group: see exit_now's docstring
