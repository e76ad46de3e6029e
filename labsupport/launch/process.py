"""One rank's process: how it is started, what it is told, and how it is closed.

The kernel side of a worker is a :class:`WorkerProcess`: the ``Popen``, the
control connection (one end of a socketpair, so nothing listens for it), the
readers that drain its stdout and stderr, and the file faulthandler writes its
stack to. Its stdin is a pipe it never reads from us: when the kernel dies the
pipe closes and the worker exits (see ``worker.py``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection

from labsupport.launch.output import StreamReader

#: Extra time the process group's own timeout gets over the cell timeout, so
#: that the launcher (which can show stacks) notices a hang first.
PG_TIMEOUT_MARGIN_S = 60.0


@dataclass
class WorkerProcess:
    """The kernel's handle on one rank."""

    rank: int
    proc: subprocess.Popen
    conn: Connection
    stdout: StreamReader
    stderr: StreamReader
    stack_file: str
    main_thread: int = 0

    def signal(self, sig: int) -> None:
        """Send ``sig`` unless the process is already gone."""
        try:
            self.proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass

    def close(self) -> None:
        """Close our ends of its pipes and connection (after it has exited)."""
        self.conn.close()
        if self.proc.stdin:
            self.proc.stdin.close()
        self.stdout.join()
        self.stderr.join()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


def loopback_interface() -> str | None:
    """Name of the interface that carries 127.0.0.1 ("lo" on Linux, "lo0" on macOS)."""
    try:
        import psutil

        for name, addrs in psutil.net_if_addrs().items():
            if any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addrs):
                return name
    except Exception:
        pass
    return None


def worker_env(
    rank: int,
    world_size: int,
    port: int,
    *,
    backend: str,
    device_type: str,
    timeout: float,
    stack_file: str,
    extra: dict[str, str],
) -> dict[str, str]:
    """The environment of one rank: yours, ``extra``, and torchrun's variables."""
    env = dict(os.environ)
    env.update(extra)
    # The ranks import what the kernel can import (your own modules too).
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *paths])
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        LABSUPPORT_BACKEND=backend,
        LABSUPPORT_DEVICE_TYPE=device_type,
        LABSUPPORT_PG_TIMEOUT=str(timeout + PG_TIMEOUT_MARGIN_S),
        LABSUPPORT_STACK_FILE=stack_file,
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
    )
    # Like torchrun: one intra-op thread per rank unless you say otherwise,
    # since the ranks already share the cores.
    env.setdefault("OMP_NUM_THREADS", "1")
    loopback = loopback_interface()
    if backend == "gloo" and loopback and "GLOO_SOCKET_IFNAME" not in extra:
        env["GLOO_SOCKET_IFNAME"] = loopback
    for key in ("LABSUPPORT_STORE_FD", "LABSUPPORT_CTL_FD"):
        env.pop(key, None)
    return env


def spawn(rank: int, env: dict[str, str], store_sock: socket.socket | None) -> WorkerProcess:
    """Start one rank with ``env``; rank 0 also gets the store's listening socket."""
    parent, child = socket.socketpair()
    env = dict(env, LABSUPPORT_CTL_FD=str(child.fileno()))
    fds = [child.fileno()]
    if store_sock is not None:
        env["LABSUPPORT_STORE_FD"] = str(store_sock.fileno())
        fds.append(store_sock.fileno())
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "labsupport.launch.worker"],
            stdin=subprocess.PIPE,  # the lifeline: closes when we go
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            pass_fds=fds,
            start_new_session=True,  # a terminal's Ctrl-C reaches us, not them
        )
    finally:
        child.close()
    return WorkerProcess(
        rank=rank,
        proc=proc,
        conn=Connection(parent.detach()),
        stdout=StreamReader(proc.stdout.fileno(), f"rank{rank}-stdout"),
        stderr=StreamReader(proc.stderr.fileno(), f"rank{rank}-stderr"),
        stack_file=env["LABSUPPORT_STACK_FILE"],
    )
