"""The ``%%ranks`` cell magic and ``%ranks`` line magic (``%load_ext labsupport``).

::

    %%ranks                        # the cell runs on every rank of the current cluster
    %%ranks -n 8 --backend gloo    # a cluster of 8 gloo ranks (started if needed)
    %%ranks --timeout 10 --show 0  # this cell only: 10 s limit, print rank 0's output
    %%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL   # ranks started with extra variables
    %%ranks --network two-nodes    # ranks on an emulated network (labsupport.netem preset)

    %ranks status | restart | shutdown

Options that shape the group (``-n``, ``--backend``, ``--env``, ``--network``) start a new
cluster when the current one differs; ``--timeout`` and ``--show`` apply to
the one cell. A plain ``%%ranks`` uses whatever cluster is current, starting a
4-rank one if there is none.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from labsupport.runtime.launch.cluster import Cluster, current_cluster
from labsupport.runtime.launch.errors import LabError
from labsupport.runtime.launch.lifecycle import eager_standby

DEFAULT_WORLD_SIZE = 4


@magic_arguments(name="%ranks")
@argument("-n", "--nproc", type=int, default=None, help="number of ranks (default 4)")
@argument("--backend", default=None, help="auto, gloo, nccl or hccl (default auto)")
@argument("--timeout", type=float, default=None, help="seconds this cell may take")
@argument("--show", default=None, help="ranks whose output to print, e.g. 0,3 (default all)")
@argument(
    "--env",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="an environment variable for the ranks (repeat for more); starts a new cluster",
)
@argument(
    "--network",
    default=None,
    help="an emulated network preset (labsupport.netem.presets), or none; starts a new cluster",
)
def _ranks_options(line: str, cell: str | None = None) -> None:
    """Run the cell on every rank of the current cluster (``%ranks status|restart|shutdown``)."""


def parse_show(text: str | None, world_size: int) -> list[int] | None:
    """``"0,3"`` -> ``[0, 3]``; ``"all"`` or None -> None (every rank)."""
    if text is None or text.strip().lower() == "all":
        return None
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--show takes rank numbers like 0,3; got {text!r}.") from None
    bad = [r for r in ranks if not 0 <= r < world_size]
    if bad:
        raise ValueError(
            f"--show: no rank {bad[0]} in a group of {world_size} (0..{world_size - 1})."
        )
    return ranks


def parse_env(items: list[str]) -> dict[str, str]:
    """``["A=1", "B=x"]`` -> ``{"A": "1", "B": "x"}``, with a clear error for bad items."""
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env takes KEY=VALUE; got {item!r}.")
        env[key] = value
    return env


def cluster_for(line: str) -> tuple[Cluster, argparse.Namespace]:
    """The cluster a ``%%ranks`` line asks for, starting or replacing one as needed.

    A bad option is an IPython ``UsageError`` that shows the usage.
    """
    args = parse_argstring(_ranks_options, line)
    env = parse_env(args.env)
    network = None
    if args.network is not None:
        from labsupport.runtime.emulator.cluster import preset_or_none

        network = preset_or_none(args.network)
    cluster = current_cluster()
    wanted_n = args.nproc
    if cluster is not None:
        differs = (
            (wanted_n is not None and wanted_n != cluster.world_size)
            or (args.backend is not None and args.backend != cluster.requested_backend)
            or (args.env and env != cluster.env)
            or (args.network is not None and network != cluster.network)
        )
        if differs:
            print(
                f"[labsupport] replacing the cluster of {cluster.world_size} {cluster.backend} "
                f"ranks to match: %%ranks {line.strip()}"
            )
            cluster.shutdown()
            cluster = None
    if cluster is None:
        world_size = wanted_n if wanted_n is not None else DEFAULT_WORLD_SIZE
        cluster = Cluster(
            world_size=world_size,
            backend=args.backend or "auto",
            env=env,
            network=network,
            standby=eager_standby(world_size),
        )
        print(f"[labsupport] started {cluster.banner()}")
    return cluster, args


def ranks_cell(line: str, cell: str, name: str | None = None) -> None:
    """Run ``cell`` on every rank; print output by rank, then each rank's value."""
    __tracebackhide__ = True
    cluster, args = cluster_for(line)
    show = parse_show(args.show, cluster.world_size)
    values = cluster.exec(cell, timeout=args.timeout, show=show, name=name)
    for rank, value in enumerate(values):
        if value is not None and (show is None or rank in show):
            print(_format_value(rank, value))


def _format_value(rank: int, value: Any) -> str:
    text = repr(value)
    pad = " " * len(f"[rank {rank}] Out: ")
    return f"[rank {rank}] Out: " + text.replace("\n", "\n" + pad)


def ranks_line(line: str) -> Any:
    """``%ranks status | restart | shutdown``."""
    word = line.strip().lower()
    cluster = current_cluster()
    if word in ("", "status"):
        if cluster is None:
            print("no cluster running; the next %%ranks cell starts one with 4 ranks")
        else:
            choice = cluster.choice
            print(f"{cluster!r}: {cluster.banner()}")
            print(f"  backend  {choice.backend} on {choice.device_type}, because:")
            for reason in choice.reason.split("; "):  # one reason a line: no mid-word wraps
                print(f"           - {reason}")
            print(f"  timeout  {cluster.timeout:g} s per cell (%%ranks --timeout for one cell)")
            print(f"  env      {cluster.env or 'nothing added'}")
        return None
    if word == "restart":
        if cluster is None:
            cluster = Cluster(world_size=DEFAULT_WORLD_SIZE)
            print(f"[labsupport] started {cluster.banner()}")
        else:
            cluster.restart()
        return None
    if word == "shutdown":
        if cluster is not None:
            cluster.shutdown()
            print("[labsupport] cluster shut down")
        return None
    raise ValueError(f"%ranks takes status, restart or shutdown; got {line.strip()!r}.")


def _show_lab_error(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):  # noqa: ANN001
    """Show a :class:`LabError` (or the stop button's :class:`CellInterrupted`) as its message.

    The message already holds what matters (the remote traceback, where each
    rank was blocked); the kernel-side frames of the launcher would only bury it.
    Like IPython's own handler, it keeps the error in ``sys.last_value`` so a
    later cell can look at it (notebook 02 draws a deadlock from its stacks).
    """
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    shell._showtraceback(etype, value, shell.InteractiveTB.get_exception_only(etype, value))


def register(ipython: Any) -> None:
    """Register ``%ranks`` / ``%%ranks`` with an IPython shell."""

    def ranks(line: str, cell: str | None = None) -> Any:
        __tracebackhide__ = True
        if cell is None:
            return ranks_line(line)
        return ranks_cell(line, cell, name="%%ranks cell")

    ranks.__doc__ = __doc__ + "\n" + (_ranks_options.__doc__ or "")
    ipython.register_magic_function(ranks, magic_kind="line_cell", magic_name="ranks")
    ipython.set_custom_exc((LabError,), _show_lab_error)
