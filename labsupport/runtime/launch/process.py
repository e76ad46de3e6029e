"""One rank's process: how it is started, signalled, and killed with its children.

The kernel side of a worker is a :class:`WorkerProcess`: the ``Popen``, the
control connection (one end of a socketpair, so nothing listens for it), the
readers that drain its stdout and stderr, and the file faulthandler writes its
stack to. Its stdin is a pipe it never reads from us: when the kernel dies the
pipe closes and the worker exits (see ``worker.py``).

Each rank leads its own process group (``start_new_session``), so whatever it
starts (a ``subprocess``, DataLoader workers) is in that group too, and
:meth:`WorkerProcess.kill` ends them all with one ``killpg``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection

from labsupport.runtime.launch.output import StreamReader

#: What a signal usually means when it ends a rank.
_SIGNAL_HINTS = {
    signal.SIGKILL: "often the out-of-memory killer",
    signal.SIGSEGV: "a crash in C/C++ code",
    signal.SIGABRT: "an abort in C/C++ code, e.g. a failed check in the backend",
    signal.SIGBUS: "a crash in C/C++ code",
}


def describe_exit(code: int | None) -> str:
    """How a rank ended: ``-9`` -> "was killed by SIGKILL (often the out-of-memory
    killer)"; ``3`` -> "exited with code 3"."""
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = _SIGNAL_HINTS.get(-code)
        return f"was killed by {name}" + (f" ({hint})" if hint else "")
    return f"exited with code {code}"


def kill_group(pid: int) -> None:
    """Kill the process group that ``pid`` leads (a process started with its own session or
    group, and everything it started); nothing if it is gone already."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


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

    @property
    def readers(self) -> tuple[StreamReader, StreamReader]:
        """The readers of the rank's stdout and stderr."""
        return (self.stdout, self.stderr)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the rank itself, unless it is already gone."""
        try:
            self.proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass

    def kill(self) -> None:
        """Kill the rank and every process it started (its whole process group)."""
        kill_group(self.proc.pid)

    def close(self, wait: float = 10.0) -> None:
        """Kill what is left of its process group, reap it, close our ends."""
        self.kill()
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self.stdout.join(1.0)
        self.stderr.join(1.0)


def spawn(
    rank: int, env: dict[str, str], store_sock: socket.socket | None, output_limit: int
) -> WorkerProcess:
    """Start one rank with ``env``; rank 0 also gets the store's listening socket."""
    parent, child = socket.socketpair()
    env = dict(env, LABSUPPORT_CTL_FD=str(child.fileno()))
    fds = [child.fileno()]
    if store_sock is not None:
        env["LABSUPPORT_STORE_FD"] = str(store_sock.fileno())
        fds.append(store_sock.fileno())
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "labsupport.runtime.launch.worker"],
            stdin=subprocess.PIPE,  # the lifeline: closes when we go
            stdout=out_w,
            stderr=err_w,
            env=env,
            pass_fds=fds,
            start_new_session=True,  # its own process group; a terminal's Ctrl-C reaches us
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        parent.close()
        raise
    finally:
        child.close()
        os.close(out_w)
        os.close(err_w)
    return WorkerProcess(
        rank=rank,
        proc=proc,
        conn=Connection(parent.detach()),
        stdout=StreamReader(out_r, f"rank{rank}-stdout", output_limit),
        stderr=StreamReader(err_r, f"rank{rank}-stderr", output_limit),
        stack_file=env["LABSUPPORT_STACK_FILE"],
    )
