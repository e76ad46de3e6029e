"""The first thing to run on a new cluster: can every rank join, and does each get its own device?

::

    torchrun --nproc_per_node=8 examples/hello_ranks.py                  # one server
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --master_addr=<server 0> \
        --master_port=29500 examples/hello_ranks.py --timeout 60       # then node_rank=1
    srun --ntasks-per-node=8 python examples/hello_ranks.py --timeout 60  # in a Slurm job
    sbatch examples/slurm/hello_ranks.sbatch                             # the same, as a batch job

Each rank prints its RANK, WORLD_SIZE and LOCAL_RANK (torchrun's variables, or
srun's SLURM_PROCID, SLURM_STEP_NUM_TASKS and SLURM_LOCALID: see
``labsupport.runtime.cluster_env``), the device it takes (``LOCAL_RANK`` on its own node,
never ``RANK``), the devices it can see (CUDA_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES,
when set), and the sum of all ranks from one ``all_reduce`` (it must be n(n-1)/2).
The process group gives up after ``--timeout`` seconds instead of the default 10
(NCCL) or 30 minutes (torch's store client may try a second time, so a rank can wait
up to about twice that), so a rank that never arrives costs a short wait and a clear
error that says where the ranks were to meet, and why there.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

from labsupport.runtime import cluster_env
from labsupport.runtime.backend import rank_device
from labsupport.runtime.scripts import common_options, exit_now, init_group

#: Variables that limit which devices a process sees (CUDA's, and CANN's for Ascend NPUs).
VISIBILITY = ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--backend``, ``--timeout``)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], parents=[common_options("backend")]
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the group may wait")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Join the group, all-reduce the ranks, print one line per rank; 0 if the sum is right."""
    args = parse(argv)
    try:  # once: a second export would find the torchrun names the first one set
        me = cluster_env.export()  # torchrun's RANK, WORLD_SIZE, ... else srun's, as torchrun's
    except cluster_env.NotLaunched as exc:
        sys.exit(f"hello_ranks: {exc}")
    start = time.monotonic()
    try:
        init_group(me, args.backend, timeout=args.timeout)
    except dist.DistError as exc:  # a store that cannot be reached, or ranks that never came
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.exit(
            f"RANK {me.rank} of {me.world_size} ({me.launcher}): the ranks did not all meet at "
            f"{me.rendezvous()} within {time.monotonic() - start:.0f} s (--timeout "
            f"{args.timeout:g}).\n  {type(exc).__name__}: {first}\n  Check that every rank "
            "started, that MASTER_ADDR is rank 0's host and reachable from here, and that "
            "MASTER_PORT is free there."
        )
    rank, local_rank = me.rank, me.local_rank
    device = rank_device()
    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)
    n = dist.get_world_size()
    sees = "".join(f"; {v}={os.environ[v]}" for v in VISIBILITY if v in os.environ)
    print(
        f"RANK {rank} of WORLD_SIZE {n} on {socket.gethostname()}: LOCAL_RANK {local_rank}, "
        f"device {device}; sum of ranks {total.item():.0f} (expected {n * (n - 1) // 2}); "
        f"started by {me.launcher}{sees}",
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if total.item() == n * (n - 1) // 2 else 1


if __name__ == "__main__":
    exit_now(main())  # after destroy_process_group: see exit_now's docstring
