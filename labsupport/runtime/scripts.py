"""What the scripts in ``examples/`` and ``benchmarks/`` share: their common options, and how
a script started by torchrun (or srun) joins its group.

One spelling for each option, in every script::

    --nproc N        ranks to start on this machine (also --world-size N, --ranks N)
    --backend NAME   auto (hccl on NPUs, nccl on GPUs, else gloo), hccl, nccl or gloo
    --network NAME   emulate a network over gloo on the CPU (a netem preset)

A script builds its parser on the options it uses,
``argparse.ArgumentParser(parents=[common_options("backend", "network")])``, and a
torchrun script starts with ``me = join_group("capstone", args.backend, args.network)``
and ends with ``exit_now(main())``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import TYPE_CHECKING

# Re-exported: scripts end with exit_now(main()) (it lives with the launcher's ranks).
from labsupport.runtime.launch.exit import exit_now as exit_now

if TYPE_CHECKING:
    from labsupport.runtime.cluster_env import RankEnv

#: The values of ``--backend``.
BACKENDS = ("auto", "hccl", "nccl", "gloo")


def common_options(
    *names: str, ranks: int = 4, network: str | None = None
) -> argparse.ArgumentParser:
    """A parent parser with the shared options ``names`` ("ranks", "backend", "network").

    ``ranks`` is the default of ``--nproc`` (``args.nproc``); ``network`` the default of
    ``--network`` (None: the real network).
    """
    unknown = set(names) - {"ranks", "backend", "network"}
    if unknown:
        raise ValueError(f"no common option {sorted(unknown)}: use ranks, backend or network")
    parent = argparse.ArgumentParser(add_help=False)
    if "ranks" in names:
        parent.add_argument(
            "--nproc",
            "--world-size",
            "--ranks",
            dest="nproc",
            type=int,
            default=ranks,
            metavar="N",
            help=f"ranks to start on this machine (default {ranks})",
        )
    if "backend" in names:
        parent.add_argument(
            "--backend",
            choices=BACKENDS,
            default="auto",
            help="auto: hccl on NPUs, nccl on GPUs, else gloo",
        )
    if "network" in names:
        from labsupport.netem import PRESETS

        presets = ", ".join(PRESETS)
        parent.add_argument(
            "--network",
            default=network,
            help=f"emulate a network over gloo on the CPU: {presets}",
        )
    return parent


def join_group(
    prog: str,
    backend: str = "auto",
    network: str | None = None,
    timeout: float | None = None,
) -> RankEnv:
    """Join the group torchrun (or srun) started this process in; return its place in it.

    The rank and rendezvous come from :func:`labsupport.runtime.cluster_env.export`; outside
    torchrun and srun the script exits with ``prog``'s message. Then :func:`init_group`.
    """
    from labsupport.runtime import cluster_env

    try:
        me = cluster_env.export()  # torchrun's RANK, WORLD_SIZE, ... else srun's, as torchrun's
    except cluster_env.NotLaunched as exc:
        sys.exit(f"{prog}: {exc}")
    init_group(me, backend, network, timeout)
    return me


def init_group(
    me: RankEnv, backend: str = "auto", network: str | None = None, timeout: float | None = None
) -> None:
    """``dist.init_process_group`` for the rank ``me`` (env:// rendezvous, as exported).

    With ``network``, the ranks run the emulated network over gloo; else ``backend``
    ("auto": the device's) is chosen for this node's ranks, and each rank takes the
    device of its ``LOCAL_RANK``. ``timeout`` (seconds) bounds how long ranks wait.
    """
    import torch.distributed as dist

    options = {} if timeout is None else {"timeout": datetime.timedelta(seconds=timeout)}
    if network:
        from labsupport import netem
        from labsupport.runtime import emulator

        dist.init_process_group(emulator.register(netem.resolve(network), me.world_size), **options)
        return
    from labsupport.runtime.backend import detect_backend
    from labsupport.runtime.device import set_device

    choice = detect_backend(me.local_world_size, backend)  # devices are per node
    if choice.device_type != "cpu":
        set_device(f"{choice.device_type}:{me.local_rank}")
    dist.init_process_group(choice.backend, **options)
