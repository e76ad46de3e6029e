"""What a cluster is started with: one place for every start-up option.

A :class:`ClusterOptions` is checked once, kept by the cluster for its whole
life (a restart after a failure starts the same group again), and turned into
each rank's environment by :func:`worker_env`. Adding an option means adding a
field here, checking it in ``__post_init__`` and, if the ranks need it, one
line in :func:`worker_env`.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field

import psutil

from labsupport.runtime.backend import validate_world_size

#: The process group's own timeout (fixed when the ranks join) is this much
#: longer than the longest cell timeout allowed, so that the launcher, which
#: can show where each rank is blocked, always notices a hang first.
PG_TIMEOUT_MARGIN_S = 60.0
#: A cell may take at least this long whatever the cluster's default timeout
#: (``%%ranks --timeout 600`` works on a cluster started with ``timeout=60``).
MIN_CELL_TIMEOUT_LIMIT_S = 3600.0
#: Default bound on the output a cell prints, all ranks together (head + tail).
DEFAULT_OUTPUT_LIMIT = 1_000_000

# Variables that describe the group; a user's ``env`` may not override them.
_GROUP_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class ClusterOptions:
    """The start-up options of a cluster (see :class:`labsupport.Cluster`)."""

    world_size: int = 4
    backend: str = "auto"
    timeout: float = 60.0
    env: dict[str, str] = field(default_factory=dict)
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    #: An emulated network (a ``labsupport.netem.Network``, checked by ``Cluster``), or None.
    network: object = None

    def __post_init__(self) -> None:
        validate_world_size(self.world_size)
        _positive("timeout", self.timeout, "seconds")
        _positive("output_limit", self.output_limit, "characters")
        env = dict(self.env or {})
        bad = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise TypeError(f"env must map names to strings; fix the values of {bad}.")
        taken = [k for k in env if k in _GROUP_VARS]
        if taken:
            raise ValueError(f"env cannot set {taken}: the launcher sets them for each rank.")
        object.__setattr__(self, "env", env)

    @property
    def max_cell_timeout(self) -> float:
        """The longest timeout a single cell may ask for on this cluster."""
        return max(self.timeout, MIN_CELL_TIMEOUT_LIMIT_S)

    def cell_timeout(self, timeout: float | None) -> float:
        """The timeout of one cell: ``timeout``, or the cluster's when None (checked)."""
        timeout = self.timeout if timeout is None else timeout
        _positive("timeout", timeout, "seconds")
        if timeout > self.max_cell_timeout:
            raise ValueError(
                f"timeout={timeout:g} s is longer than this cluster's process group allows "
                f"({self.max_cell_timeout:g} s, fixed when the ranks started); start "
                f"the cluster with lab.Cluster(timeout={timeout:g}) for cells that long."
            )
        return float(timeout)

    @property
    def pg_timeout(self) -> float:
        """The process group's own timeout, in seconds."""
        return self.max_cell_timeout + PG_TIMEOUT_MARGIN_S


def _positive(name: str, value: object, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of {unit}; got {value!r}.")


def loopback_interface() -> str | None:
    """Name of the interface that carries 127.0.0.1 ("lo" on Linux, "lo0" on macOS)."""
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addrs):
            return name
    return None


def _merged_path(*parts: str) -> str:
    """Join path lists, keeping the first occurrence of each entry."""
    seen: list[str] = []
    for part in parts:
        for entry in part.split(os.pathsep) if part else ():
            if entry and entry not in seen:
                seen.append(entry)
    return os.pathsep.join(seen)


def worker_env(
    options: ClusterOptions,
    rank: int,
    *,
    port: int,
    backend: str,
    device_type: str,
    stack_file: str,
) -> dict[str, str]:
    """The environment of one rank: yours, ``options.env``, and torchrun's variables.

    ``PYTHONPATH`` is merged, not replaced: your entries first, then the
    notebook's folder and the kernel's ``sys.path`` (so ranks import what the
    kernel can import, your own modules too).
    """
    env = dict(os.environ)
    env.update(options.env)
    if options.network is not None:  # the ranks install it before joining (labsupport.netem)
        env["LABSUPPORT_NETWORK"] = options.network.to_json()
    kernel_paths = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    env["PYTHONPATH"] = _merged_path(
        options.env.get("PYTHONPATH", ""),
        os.getcwd(),
        kernel_paths,
        os.environ.get("PYTHONPATH", ""),
    )
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(options.world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(options.world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        LABSUPPORT_BACKEND=backend,
        LABSUPPORT_DEVICE_TYPE=device_type,
        LABSUPPORT_PG_TIMEOUT=str(options.pg_timeout),
        LABSUPPORT_STACK_FILE=stack_file,
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
    )
    # Like torchrun: one intra-op thread per rank unless you say otherwise,
    # since the ranks already share the cores.
    env.setdefault("OMP_NUM_THREADS", "1")
    loopback = loopback_interface()
    if backend == "gloo" and loopback and "GLOO_SOCKET_IFNAME" not in options.env:
        env["GLOO_SOCKET_IFNAME"] = loopback
    for key in ("LABSUPPORT_STORE_FD", "LABSUPPORT_CTL_FD"):
        env.pop(key, None)
    return env
