"""Run ``torchrun`` from a notebook, bounded: several at once, each killed at a deadline.

Notebook 09 starts real ``torchrun`` launchers on this machine to show what a failed
rendezvous looks like (a port already in use, a wrong ``MASTER_ADDR``, a node that
never starts). A launcher that waits for a peer can wait a long time, and it starts
worker processes of its own, so each one runs here in its own process session: at
the deadline, or as soon as it has exited, the whole session is killed, and nothing
is left running::

    port = free_port()
    runs = run_torchrun([["--nnodes=2", "--node-rank=0", f"--master-port={port}", ...]])
    print(runs[0].returncode, runs[0].error_line())

``torchrun`` is ``python -m torch.distributed.run``; this module calls it that way,
with this interpreter. Everything stays on the loopback interface
(``GLOO_SOCKET_IFNAME``), but note that torchrun's rendezvous store listens on every
interface of the machine while it runs (see TCPStore).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from labsupport.runtime.launch.process import kill_group

#: The last line of a Python traceback: ``package.module.SomeError: message``.
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception): .+")
#: The same, raised with no message (torchrun's ``RendezvousTimeoutError`` is).
_BARE_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception):?$")


@dataclass(frozen=True)
class TorchrunResult:
    """One launcher's outcome: its arguments, exit code (None: killed at the deadline),
    how long it took, and everything it printed (stdout and stderr together)."""

    args: tuple[str, ...]
    returncode: int | None
    seconds: float
    output: str

    def error_line(self) -> str:
        """The launcher's final error (``SomeError: message``), or a note if there is none."""
        lines = [line.strip() for line in self.output.splitlines()]
        errors = [line for line in lines if _ERROR_LINE.match(line)]
        if errors:
            return errors[-1]
        bare = [line.rstrip(":") for line in lines if _BARE_ERROR.match(line)]
        if bare:
            return f"{bare[-1]} (raised with no message)"
        if self.returncode is None:
            return f"(still running after {self.seconds:.0f} s: killed)"
        return f"(no error line; exit code {self.returncode})"

    def root_cause(self) -> str:
        """The "Root Cause" block of torchrun's ``ChildFailedError`` summary ("" if none):
        which worker failed first (rank, local rank, exit code, pid, host, time)."""
        lines = self.output.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), None)
        if start is None:
            return ""
        block = []
        for line in lines[start:]:
            if line.startswith("====="):
                break
            block.append(line.rstrip())
        return "\n".join(block)


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def port_in_use() -> Iterator[int]:
    """Hold a listening socket on 127.0.0.1 for the block; yield its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


#: The worker script of the "a worker crashes" case: rank 1 raises in its own code.
CRASH_SCRIPT = "import os\nif os.environ['RANK'] == '1':\n    raise ValueError('a bug on rank 1')\n"


def failure_cases(busy_port: int, timeout: int = 3) -> dict[str, list[str]]:
    """torchrun's arguments for five ways a launch fails (notebook 09 and its deck run them).

    ``busy_port`` is a port something already listens on (:func:`port_in_use`);
    ``timeout`` is each rendezvous timeout, in seconds. Every case but the last runs
    ``examples/hello_ranks.py`` (one all_reduce), which never gets to start.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "examples", "hello_ranks.py")
    crash = os.path.join(tempfile.gettempdir(), "labsupport_crash.py")
    with open(crash, "w") as f:
        f.write(CRASH_SCRIPT)
    static = ["--nproc-per-node=1", f"--rdzv-conf=timeout={timeout}"]
    return {
        "port already in use": [*static, "--nnodes=1", f"--master-port={busy_port}", script],
        "wrong MASTER_ADDR": [
            *static,
            "--nnodes=2",
            "--node-rank=1",
            "--master-addr=127.0.0.2",
            f"--master-port={free_port()}",
            script,
        ],
        "node 1 never starts (static)": [
            *static,
            "--nnodes=2",
            "--node-rank=0",
            "--master-addr=127.0.0.1",
            f"--master-port={free_port()}",
            script,
        ],
        "node 1 never starts (c10d)": [
            "--nproc-per-node=1",
            "--nnodes=2",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{free_port()}",
            f"--rdzv-conf=join_timeout={timeout}",
            script,
        ],
        "a worker crashes": ["--standalone", "--nproc-per-node=2", crash],
    }


def _launcher_env(extra: dict[str, str] | None) -> dict[str, str]:
    from labsupport.runtime.launch.options import loopback_interface

    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    loopback = loopback_interface()
    if loopback:
        env.setdefault("GLOO_SOCKET_IFNAME", loopback)
    env.update(extra or {})
    return env


def _kill_session(proc: subprocess.Popen) -> None:
    """Kill the launcher and every process it started (they share its session)."""
    kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def run_torchrun(
    jobs: Sequence[Sequence[str]],
    *,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> list[TorchrunResult]:
    """Start one ``torchrun`` per entry of ``jobs`` (its arguments), all at once; wait for
    them, at most ``timeout`` seconds; return their results in the same order.

    A launcher still running at the deadline is killed with its workers
    (``returncode`` None). ``env`` adds variables to the launchers' environment.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}.")
    start = time.monotonic()
    procs, logs = [], []
    try:
        for args in jobs:
            log = tempfile.TemporaryFile(mode="w+")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "torch.distributed.run", *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_launcher_env(env),
                    start_new_session=True,
                )
            )
        ended: dict[int, float] = {}
        while len(ended) < len(procs) and time.monotonic() - start < timeout:
            for i, proc in enumerate(procs):
                if i not in ended and proc.poll() is not None:
                    ended[i] = time.monotonic() - start
            time.sleep(0.05)
        results = []
        for i, (args, proc, log) in enumerate(zip(jobs, procs, logs, strict=True)):
            returncode = proc.poll()
            seconds = ended.get(i, time.monotonic() - start)
            _kill_session(proc)
            log.seek(0)
            results.append(TorchrunResult(tuple(args), returncode, seconds, log.read()))
        return results
    finally:
        for proc in procs:
            _kill_session(proc)
        for log in logs:
            log.close()
