"""The life cycle of one group of N rank processes: start, wait until ready, stop.

Starting a group is split in two, so that it can happen in the background:
:class:`Group` spawns the N processes at once (a fraction of a second) and
:meth:`Group.wait_ready` waits for them to import torch and join the process
group (the slow part, seconds). The cluster starts a replacement group the
moment a cell fails, and only waits for it when the next cell needs it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from multiprocessing.connection import wait

from labsupport.runtime.backend import BackendChoice
from labsupport.runtime.launch.options import ClusterOptions, worker_env
from labsupport.runtime.launch.process import WorkerProcess, describe_exit, spawn
from labsupport.runtime.launch.stacks import read_stack

#: How long a group may take to start.
STARTUP_TIMEOUT_S = 120.0
#: How much of a rank's stderr a start-up failure shows (where NCCL/HCCL say why).
STDERR_TAIL = 3000

# Groups being cleaned up in the background; finished before the kernel exits.
_retiring: list[threading.Thread] = []


class Group:
    """N freshly spawned ranks of one backend, sharing one rendezvous store."""

    def __init__(self, options: ClusterOptions, choice: BackendChoice) -> None:
        self.options = options
        self.choice = choice
        self.workers: list[WorkerProcess] = []
        self.ready = False
        self.tmpdir: str | None = tempfile.mkdtemp(prefix="labsupport-")  # mode 0700: ours only
        store_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            store_sock.bind(("127.0.0.1", 0))
            store_sock.listen(128)
            port = store_sock.getsockname()[1]
            for rank in range(options.world_size):
                env = worker_env(
                    options,
                    rank,
                    port=port,
                    backend=choice.backend,
                    device_type=choice.device_type,
                    stack_file=os.path.join(self.tmpdir, f"stack-{rank}.txt"),
                )
                per_rank = max(1000, options.output_limit // options.world_size)
                sock = store_sock if rank == 0 else None
                self.workers.append(spawn(rank, env, sock, per_rank))
        except BaseException:
            self.close()
            raise
        finally:
            store_sock.close()  # rank 0 holds its own copy now

    @property
    def alive(self) -> bool:
        """True while every rank is running."""
        return bool(self.workers) and all(w.proc.poll() is None for w in self.workers)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Wait until every rank joined the group; on failure stop them all and raise."""
        if self.ready:
            return
        try:
            failures = self._await_hello_and_ready(timeout)
        except BaseException:
            self.close()
            raise
        for w in self.workers:  # start-up chatter is not a cell's output
            for reader in w.readers:
                reader.wait_for(0, 0.5 if not failures else 2.0)
        if failures:
            tails = {w.rank: w.stderr.collect(0, everything=True) for w in self.workers}
            self.close()
            parts = []
            for rank, text in failures:
                tail = (tails[rank].head + tails[rank].tail)[-STDERR_TAIL:].rstrip()
                parts.append(text + (f"\n  its stderr ends with:\n{_indent(tail)}" if tail else ""))
            raise RuntimeError(
                f"could not start {self.options.world_size} {self.choice.backend} rank(s):\n"
                + "\n".join(parts)
            )
        for w in self.workers:
            for reader in w.readers:
                reader.collect(0, everything=True)
        self.ready = True

    def _await_hello_and_ready(self, timeout: float) -> list[tuple[int, str]]:
        deadline = time.monotonic() + timeout
        waiting = {w.conn: w for w in self.workers}
        failures: list[tuple[int, str]] = []
        while waiting and not failures:
            left = deadline - time.monotonic()
            if left <= 0:
                late = sorted(w.rank for w in waiting.values())
                failures.append((late[0], f"ranks {late} were not ready after {timeout:g} s"))
                break
            for conn in wait(list(waiting), timeout=left):
                worker = waiting[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    try:
                        code = worker.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        code = None
                    failures.append(
                        (worker.rank, f"rank {worker.rank} {describe_exit(code)} while starting")
                    )
                    del waiting[conn]
                    continue
                if msg[0] == "hello":
                    worker.main_thread = msg[3]
                elif msg[0] == "ready":
                    del waiting[conn]
                elif msg[0] == "init_error":
                    failures.append(
                        (worker.rank, f"rank {worker.rank} could not join the group:\n{msg[2]}")
                    )
                    del waiting[conn]
        return failures

    def stacks(self, ranks: list[int]) -> dict[int, str]:
        """Each listed rank's main-thread Python stack, via faulthandler (SIGUSR1)."""
        by_rank = {w.rank: w for w in self.workers}
        for rank in ranks:
            open(by_rank[rank].stack_file, "w").close()
            by_rank[rank].signal(signal.SIGUSR1)
        deadline = time.monotonic() + 2.0
        return {
            rank: read_stack(by_rank[rank].stack_file, by_rank[rank].main_thread, deadline)
            for rank in ranks
        }

    def shutdown(self, grace: float = 3.0) -> None:
        """Ask every rank to stop, give them ``grace`` seconds, then kill what is left."""
        for w in self.workers:
            try:
                w.conn.send(("shutdown", 0))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + grace
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.close()

    def close(self) -> None:
        """Kill every rank and everything they started; free the pipes and files."""
        for w in self.workers:
            w.kill()
        for w in self.workers:
            w.close()
        self.workers = []
        self.ready = False
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def retire(self) -> None:
        """Kill every rank now; reap and clean up in the background."""
        for w in self.workers:
            w.kill()
        thread = threading.Thread(target=self.close, name="labsupport-retire", daemon=True)
        thread.start()
        _retiring[:] = [t for t in _retiring if t.is_alive()] + [thread]


@atexit.register
def _finish_retiring() -> None:
    for thread in list(_retiring):
        thread.join(timeout=10)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
