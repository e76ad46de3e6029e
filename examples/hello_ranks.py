"""The first thing to run on a new cluster: can every rank join, and does each get its own device?

::

    torchrun --nproc_per_node=8 examples/hello_ranks.py                  # one server
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --master_addr=<server 0> \
        --master_port=29500 examples/hello_ranks.py --timeout 60       # then node_rank=1

Each rank prints RANK, LOCAL_RANK and WORLD_SIZE (set by torchrun), the device it
takes (``LOCAL_RANK`` on its own node, never ``RANK``), and the sum of all ranks
from one ``all_reduce`` (it must be n(n-1)/2). The process group gives up after
``--timeout`` seconds instead of the default 10 (NCCL) or 30 minutes, so a rank
that never arrives costs a short wait and a clear error.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist

from labsupport.backend import rank_device


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the group may wait")
    p.add_argument("--backend", default=None, help="gloo, nccl or hccl (default: by device)")
    args = p.parse_args(argv)
    if "RANK" not in os.environ:
        sys.exit("run me with torchrun: torchrun --nproc_per_node=2 examples/hello_ranks.py")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    backend = args.backend
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        try:
            import torch_npu  # noqa: F401

            backend = "hccl"
        except ImportError:
            pass
    if backend == "hccl":
        torch.npu.set_device(local_rank)  # LOCAL_RANK: the device on *this* node
    elif backend == "nccl":
        torch.cuda.set_device(local_rank)
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(backend, timeout=timeout)
    device = rank_device()
    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)
    n = dist.get_world_size()
    print(
        f"RANK {rank} of WORLD_SIZE {n} on {socket.gethostname()}: LOCAL_RANK {local_rank}, "
        f"device {device}; sum of ranks {total.item():.0f} (expected {n * (n - 1) // 2})",
        flush=True,
    )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
