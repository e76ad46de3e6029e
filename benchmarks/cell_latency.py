"""How fast is a %%ranks cell on a warm cluster, next to launching fresh ranks?

Measured side by side in one run on this machine:

* warm: median round trip of a no-op cell (``cluster.exec("pass")``) on a
  running 4-rank cluster - what every ``%%ranks`` cell pays;
* fork: start 4 processes by fork (as accelerate's ``notebook_launcher``
  does), init a gloo group, barrier, exit - what a launcher without
  persistent workers pays per cell;
* spawn: the same with fresh interpreters (``torch.multiprocessing.spawn``).

Targets (issue 2): warm at least 10x faster than fork, 100x faster than spawn.

    python benchmarks/cell_latency.py [--world-size 4] [--cells 200] [--launches 3]
    python benchmarks/cell_latency.py --smoke   # 2 ranks, 20 cells, 1 launch each: does it run?
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import time

import torch.distributed as dist
import torch.multiprocessing as mp

import labsupport as lab
from labsupport.runtime.scripts import common_options


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init_and_barrier(rank: int, world_size: int, port: int) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    dist.barrier()
    dist.destroy_process_group()


def time_launch(method: str, world_size: int) -> float:
    """Seconds to start ``world_size`` processes with ``method``, init gloo, barrier, join."""
    t0 = time.perf_counter()
    mp.start_processes(
        _init_and_barrier,
        args=(world_size, _free_port()),
        nprocs=world_size,
        start_method=method,
    )
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Time the cells; print the table (exit status 0: the targets are printed, not asserted)."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], parents=[common_options("ranks")]
    )
    parser.add_argument("--cells", type=int, default=200, help="no-op cells to time")
    parser.add_argument("--launches", type=int, default=3, help="fresh launches per method")
    parser.add_argument(
        "--smoke", action="store_true", help="2 ranks, 20 cells, 1 launch each: check that it runs"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.nproc, args.cells, args.launches = 2, 20, 1

    with lab.Cluster(world_size=args.nproc) as cluster:
        for _ in range(10):  # warm-up
            cluster.exec("pass")
        cells = []
        for _ in range(args.cells):
            t0 = time.perf_counter()
            cluster.exec("pass")
            cells.append(time.perf_counter() - t0)
    warm = statistics.median(cells)
    fork = statistics.median(time_launch("fork", args.nproc) for _ in range(args.launches))
    spawn = statistics.median(time_launch("spawn", args.nproc) for _ in range(args.launches))

    print(f"{args.nproc} ranks, gloo, medians:")
    print(f"  warm %%ranks cell      {warm * 1e3:9.2f} ms  (over {args.cells} cells)")
    print(f"  fork launch + barrier  {fork * 1e3:9.2f} ms  (over {args.launches} launches)")
    print(f"  spawn launch + barrier {spawn * 1e3:9.2f} ms")
    print(f"  fork / warm  = {fork / warm:8.1f}x   (target >= 10x)")
    print(f"  spawn / warm = {spawn / warm:8.1f}x   (target >= 100x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
