"""The capstone's training under torchrun: a tiny transformer, bucketed DDP, ZeRO-1 or torch DDP.

The same functions as notebook 10 (``labsupport.capstone``), on a real cluster or on
one machine::

    torchrun --nproc_per_node=4 examples/capstone.py --strategy ddp --bucket-mb 0.25
    torchrun --standalone --nproc_per_node=2 examples/capstone.py --strategy zero1 --check
    torchrun --standalone --nproc_per_node=4 examples/capstone.py --strategy torch \
        --network slow-ethernet        # on the emulated network of labsupport.netem

It trains ``--steps`` steps and prints the global batch's loss at each, then times
``--timed`` more steps (warm-up, barrier, device synchronize, the slowest rank), and
prints the model states each rank holds (and, on an emulated network, the bytes each
rank sent per step). ``--check`` also trains the single-process baseline next to it
on every rank and says whether the two agree at every step, or where they first
differ. Each rank uses ``labsupport.backend.rank_device()`` (LOCAL_RANK's NPU or GPU
with hccl or nccl, else the CPU) and cores // LOCAL_WORLD_SIZE threads.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch.distributed as dist

from labsupport import capstone, cluster_env, ddp, netem
from labsupport.backend import rank_device
from labsupport.bench.device import device_module


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strategy", choices=list(capstone.STRATEGIES), default="ddp")
    p.add_argument("--bucket-mb", type=float, default=0.25, help="bucket size (ddp, torch)")
    p.add_argument("--steps", type=int, default=20, help="training steps (losses printed)")
    p.add_argument("--timed", type=int, default=5, help="timed steps after them")
    p.add_argument("--d-model", type=int, default=capstone.Config.d_model)
    p.add_argument("--layers", type=int, default=capstone.Config.layers)
    p.add_argument("--batch", type=int, default=capstone.Config.batch,
                   help="global batch in sequences (a multiple of the ranks)")  # fmt: skip
    p.add_argument("--backend", default=None, help="default: hccl, nccl or gloo, as available")
    presets = ", ".join(netem.PRESETS)
    p.add_argument("--network", default=None, help=f"emulate a network: {presets} (gloo, CPU)")
    p.add_argument("--check", action="store_true",
                   help="compare with the single-process baseline, step by step")  # fmt: skip
    args = p.parse_args(argv)
    if args.steps < 1 or args.timed < 1 or args.bucket_mb <= 0:
        p.error("--steps and --timed must be >= 1 and --bucket-mb > 0")
    return args


def _backend(args: argparse.Namespace) -> str:
    if args.network:
        return netem.register(netem.resolve(args.network), int(os.environ["WORLD_SIZE"]))
    if args.backend:
        return args.backend
    from labsupport import detect_backend

    return detect_backend(int(os.environ["LOCAL_WORLD_SIZE"])).backend  # devices are per node


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:  # torchrun's RANK, WORLD_SIZE, ... else srun's SLURM_PROCID, ..., as torchrun's
        cluster_env.export()
    except cluster_env.NotLaunched as exc:
        sys.exit(f"capstone: {exc}")
    dist.init_process_group(_backend(args))
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        module = device_module(rank_device())  # None on the CPU; torch.npu / torch.cuda
        if module is not None:
            module.set_device(rank_device())  # one device per rank (LOCAL_RANK)
        ddp.use_threads(int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        cfg = capstone.Config(d_model=args.d_model, layers=args.layers, batch=args.batch)
        bucket = int(args.bucket_mb * 2**20)
        out = capstone.train(args.strategy, args.steps, cfg, bucket)
        timed = capstone.time_steps(args.strategy, args.timed, 2, cfg, bucket)
        sent = capstone.traffic_per_step(args.strategy, 2, cfg, bucket)
        found = None
        if args.check:
            mine = capstone.compare_steps(args.strategy, min(args.steps, 5), cfg, bucket,
                                          sharded=args.strategy == "zero1")  # fmt: skip
            everyone = [None] * world
            dist.all_gather_object(everyone, mine)
            found = capstone.first_divergence(everyone, sharded=args.strategy == "zero1")
        if rank == 0:
            report(args, cfg, out, timed, sent, found, world)
    finally:
        dist.destroy_process_group()
    return 1 if args.check and found is not None else 0


def report(args, cfg, out, timed, sent, found, world) -> None:  # noqa: ANN001 - a printout
    """Rank 0 prints what the ranks measured."""
    print(f"{args.strategy}: {world} ranks on {rank_device()}, "
          f"{cfg.param_bytes() / 1e6:.2f} MB of parameters, global batch {cfg.batch}")  # fmt: skip
    for i, loss in enumerate(out["losses"]):
        print(f"step {i}: loss {loss:.4f}")
    print(f"median step: {timed['median'] * 1e3:.1f} ms (slowest rank, {args.timed} steps)")
    print("model states on rank 0: " + ", ".join(
        f"{k} {v / 1e6:.2f} MB" for k, v in out["memory"].items()))  # fmt: skip
    if sent is not None:
        print(f"sent per step on the emulated network (rank 0): {sent / 1e6:.2f} MB")
    if args.check:
        if found is None:
            print("same as one process at every step (losses, gradients, weights)")
        else:
            from labsupport.check.capstone import describe

            print("DIFFERS from one process: " + describe(found, world, steps=min(args.steps, 5)))


if __name__ == "__main__":
    sys.exit(main())
