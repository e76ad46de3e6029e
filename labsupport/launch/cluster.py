"""A persistent group of N local worker processes, driven from the kernel.

``Cluster`` starts one fresh Python interpreter per rank (no fork: fork is
unsafe once a device runtime or threads exist), has them join a process group,
and then sends them work: source text (``exec``, what ``%%ranks`` uses) or a
function (``run``; notebook functions and lambdas travel by value with
cloudpickle). It collects every rank's output, value or traceback, and deals
with the failures a learner will meet on purpose:

* a rank raises            -> :class:`RankError` with the remote traceback;
* a rank dies              -> :class:`RankError` naming the exit code;
* nobody finishes in time  -> :class:`CollectiveTimeout` with each rank's stack;
* the stop button          -> workers interrupted (killed if they do not stop).

After a timeout, a death, or ranks left blocked by a failing peer, the cluster
restarts itself (and says so in one line), so the next cell starts clean.

Safety: each worker talks to the kernel over its own socketpair (nothing
listens for it), the rendezvous store listens on 127.0.0.1 only, gloo is kept
on the loopback interface, and every worker exits when the kernel's end of its
stdin pipe closes, so a killed kernel leaves no orphans.
"""

from __future__ import annotations

import atexit
import linecache
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

import cloudpickle

from labsupport.backend import BackendChoice, detect_backend, validate_world_size
from labsupport.launch.errors import CollectiveTimeout, RankError, RemoteError
from labsupport.launch.output import print_by_rank
from labsupport.launch.process import WorkerProcess, spawn, worker_env
from labsupport.launch.stacks import read_stack

#: After one rank fails, how long the others get to finish before they are
#: considered blocked (waiting in a collective for the rank that failed).
FAILURE_GRACE_S = 2.0
#: How long an interrupted cell's workers get to stop before they are killed.
INTERRUPT_GRACE_S = 3.0

# Running clusters, oldest first. The newest one still running is "current":
# when a temporary cluster (a grader's, say) shuts down, the one before it is
# current again. (Strong references: a cluster started by %%ranks lives here.)
_started: list[Cluster] = []


def current_cluster() -> Cluster | None:
    """The cluster that ``%%ranks`` uses: the most recently started one still running."""
    for cluster in reversed(_started):
        if cluster.alive:
            return cluster
    return None


def _forget(cluster: Cluster) -> None:
    _started[:] = [c for c in _started if c is not cluster]


@dataclass
class _Reply:
    status: str  # "ok", "error" or "died"
    value: Any = None
    error: RemoteError | None = None
    figures: tuple[bytes, ...] = ()


class Cluster:
    """A group of ``world_size`` ranks on this machine that runs your code.

    >>> with Cluster(world_size=2) as cluster:           # doctest: +SKIP
    ...     cluster.run(lambda: dist.get_rank())
    [0, 1]

    ``backend`` is "auto" (hccl, then nccl, then gloo), or one of them by name.
    ``timeout`` is the default time, in seconds, one cell may take.
    ``env`` adds environment variables to every rank (for example
    ``{"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}``); they apply from start-up on.
    ``network`` (a :class:`labsupport.netem.Network` or a preset's name) runs
    every message over an emulated network (gloo underneath; see ``labsupport.netem``).
    """

    def __init__(
        self,
        world_size: int = 4,
        backend: str = "auto",
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
        network: Any = None,
    ) -> None:
        if os.name == "nt":
            raise RuntimeError(
                "the launcher needs Linux or macOS (it passes sockets to its workers and reads "
                "their stacks with signals); on Windows, run the course inside WSL2."
            )
        validate_world_size(world_size)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}.")
        env = dict(env or {})
        bad = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise TypeError(f"env must map names to strings; fix the values of {bad}.")
        self.network, self._network_env = None, {}
        if network is not None:  # an emulated network: checked now, carried to the ranks as JSON
            from labsupport.netem.cluster import network_env

            self.network, backend, self._network_env = network_env(
                network, world_size, backend, env
            )
        self.choice: BackendChoice = detect_backend(world_size, backend)
        self.world_size = world_size
        self.backend = self.choice.backend
        self.requested_backend = backend
        self.timeout = float(timeout)
        self.env = env
        self.show: list[int] | None = None
        self._workers: list[WorkerProcess] = []
        self._tmpdir: str | None = None
        self._task_id = 0
        self._cell_count = 0
        self._start()
        _started.append(self)

    # ------------------------------------------------------------------ life cycle
    @property
    def alive(self) -> bool:
        """True while every worker process is running."""
        return bool(self._workers) and all(w.proc.poll() is None for w in self._workers)

    def _start(self, startup_timeout: float = 120.0) -> None:
        self._tmpdir = tempfile.mkdtemp(prefix="labsupport-")  # mode 0700: ours only
        store_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            store_sock.bind(("127.0.0.1", 0))
            store_sock.listen(128)
            port = store_sock.getsockname()[1]
            for rank in range(self.world_size):
                env = worker_env(
                    rank,
                    self.world_size,
                    port,
                    backend=self.backend,
                    device_type=self.choice.device_type,
                    timeout=self.timeout,
                    stack_file=os.path.join(self._tmpdir, f"stack-{rank}.txt"),
                    extra={**self.env, **self._network_env},
                )
                self._workers.append(spawn(rank, env, store_sock if rank == 0 else None))
        except BaseException:
            self._kill_workers()
            raise
        finally:
            store_sock.close()  # rank 0 holds its own copy now
        try:
            self._await_ready(startup_timeout)
        except BaseException:
            self._kill_workers()
            raise

    def _await_ready(self, startup_timeout: float) -> None:
        deadline = time.monotonic() + startup_timeout
        waiting = {w.conn: w for w in self._workers}
        failures: list[str] = []
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                failures.append(f"ranks {sorted(w.rank for w in waiting.values())} not ready")
                break
            for conn in wait(list(waiting), timeout=left):
                worker = waiting[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    code = worker.proc.wait(timeout=5)
                    worker.stderr.join()
                    failures.append(
                        f"rank {worker.rank} exited with code {code} while starting:\n"
                        + worker.stderr.take()[-3000:]
                    )
                    del waiting[conn]
                    continue
                if msg[0] == "hello":
                    worker.main_thread = msg[3]
                elif msg[0] == "ready":
                    del waiting[conn]
                elif msg[0] == "init_error":
                    failures.append(f"rank {worker.rank} could not join the group:\n{msg[2]}")
                    del waiting[conn]
            if failures:
                break
        for w in self._workers:
            w.stdout.wait_for(0, 2.0)
            w.stderr.wait_for(0, 2.0)
            w.stdout.take()  # start-up chatter is not a cell's output
            w.stderr.take()
        if failures:
            raise RuntimeError(
                f"could not start {self.world_size} {self.backend} rank(s):\n" + "\n".join(failures)
            )

    def _kill_workers(self) -> None:
        for w in self._workers:
            if w.proc.poll() is None:
                w.proc.kill()
        for w in self._workers:
            try:
                w.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            w.close()
        self._workers = []
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def shutdown(self) -> None:
        """Stop every rank and free everything (safe to call twice)."""
        for w in self._workers:
            try:
                w.conn.send(("shutdown", 0))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 3.0
        for w in self._workers:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._kill_workers()
        _forget(self)

    def restart(self, reason: str = "restarted on request") -> None:
        """Replace every rank with a fresh one (all state defined on the ranks is lost)."""
        self._kill_workers()
        self._start()
        _started.append(self)
        print(
            f"[labsupport] cluster {reason}: {self.world_size} fresh {self.backend} ranks "
            "(names defined in earlier cells are gone)",
            flush=True,
        )

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"Cluster(world_size={self.world_size}, backend={self.backend!r}, {state})"

    # ------------------------------------------------------------------ running code
    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``fn(*args, **kwargs)`` on every rank; return the values, index = rank."""
        __tracebackhide__ = True
        return self.call(fn, args, kwargs)

    def call(
        self,
        fn: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        show: list[int] | None = None,
    ) -> list[Any]:
        """Like :meth:`run`, with a per-call ``timeout`` and ``show`` (the ranks to print)."""
        __tracebackhide__ = True
        payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
        return self._dispatch(("call", payload), timeout, show)

    def exec(
        self,
        source: str,
        *,
        timeout: float | None = None,
        show: list[int] | None = None,
        name: str | None = None,
    ) -> list[Any]:
        """Run ``source`` on every rank in its persistent namespace; return the last values.

        ``name`` labels the source in tracebacks and stacks (``%%ranks`` passes
        the notebook's ``In [n]``).
        """
        __tracebackhide__ = True
        self._cell_count += 1
        filename = f"<{name}>" if name else f"<rank-cell-{self._cell_count}>"
        compile(source, filename, "exec")  # a syntax error stops here, before any rank runs
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return self._dispatch(("exec", source, filename), timeout, show)

    def _dispatch(self, request: tuple, timeout: float | None, show: list[int] | None) -> list[Any]:
        __tracebackhide__ = True
        if not self.alive:
            self.restart("was not running (a rank had exited)")
        timeout = self.timeout if timeout is None else float(timeout)
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}.")
        show = self.show if show is None else list(show)
        self._task_id += 1
        task = self._task_id
        kind, *body = request
        for w in self._workers:
            w.conn.send((kind, task, *body))
        replies, interrupted = self._collect(task, timeout)
        blocked = [w.rank for w in self._workers if w.rank not in replies]
        stacks = self._stacks(blocked) if blocked and not interrupted else {}
        outputs = {}
        for w in self._workers:
            if w.rank in replies:
                w.stdout.wait_for(task, 2.0)
                w.stderr.wait_for(task, 2.0)
            outputs[w.rank] = (w.stdout.take(), w.stderr.take())
        print_by_rank(outputs, show, sys.stdout, sys.stderr)
        _display_figures(replies, show)

        errors = {r: rep.error for r, rep in replies.items() if rep.error is not None}
        died = any(rep.status == "died" for rep in replies.values())
        if interrupted:
            if blocked or died:
                self.restart("restarted after an interrupt (ranks did not stop)")
                raise KeyboardInterrupt(
                    "interrupted: the ranks did not stop, so they were restarted"
                )
            raise KeyboardInterrupt("interrupted on every rank; the ranks keep their state")
        if blocked or died:
            what = (
                "restarted after a failure" if errors else f"restarted after a {timeout:g} s hang"
            )
            self.restart(what)
        if errors:
            dead = [r for r, rep in replies.items() if rep.status == "died"]
            first = dead[0] if dead else next(iter(errors))  # replies are in arrival order
            raise RankError(errors, stacks, restarted=bool(blocked or died), first=first)
        if blocked:
            raise CollectiveTimeout(timeout, stacks)
        return [replies[r].value for r in range(self.world_size)]

    def _collect(self, task: int, timeout: float) -> tuple[dict[int, _Reply], bool]:
        """Wait for every rank's reply, the timeout, or an interrupt."""
        replies: dict[int, _Reply] = {}
        waiting = {w.conn: w for w in self._workers}
        deadline = time.monotonic() + timeout
        interrupted = False
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ready = wait(list(waiting), timeout=min(left, 0.5))
                for conn in ready:
                    worker = waiting.pop(conn)
                    replies[worker.rank] = self._receive(worker, task)
            except KeyboardInterrupt:
                interrupted = True
                for w in waiting.values():
                    w.signal(signal.SIGINT)
                deadline = time.monotonic() + INTERRUPT_GRACE_S
                continue
            if any(r.status != "ok" for r in replies.values()):
                deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        return replies, interrupted

    @staticmethod
    def _receive(worker: WorkerProcess, task: int) -> _Reply:
        try:
            msg = worker.conn.recv()
        except (EOFError, OSError):
            try:
                code = worker.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            err = RemoteError(
                worker.rank,
                "WorkerDied",
                f"rank {worker.rank} exited with code {code} before finishing the cell",
                f"(no traceback: the process exited with code {code})\n",
            )
            return _Reply("died", error=err)
        _, task_id, status, payload, figures = msg
        if status == "ok":
            try:
                value = cloudpickle.loads(payload)
            except Exception as exc:
                value = f"<value of rank {worker.rank} could not be unpickled here: {exc}>"
            return _Reply("ok", value=value, figures=tuple(figures))
        err = RemoteError(worker.rank, payload["type"], payload["message"], payload["traceback"])
        return _Reply("error", error=err, figures=tuple(figures))

    def _stacks(self, ranks: list[int]) -> dict[int, str]:
        """Each listed rank's main-thread Python stack, via faulthandler (SIGUSR1)."""
        by_rank = {w.rank: w for w in self._workers}
        for rank in ranks:
            open(by_rank[rank].stack_file, "w").close()
            by_rank[rank].signal(signal.SIGUSR1)
        deadline = time.monotonic() + 2.0
        return {
            rank: read_stack(by_rank[rank].stack_file, by_rank[rank].main_thread, deadline)
            for rank in ranks
        }


def _display_figures(replies: dict[int, _Reply], show: list[int] | None) -> None:
    """Show the figures ranks left open, in rank order (only inside IPython)."""
    figures = [
        (rank, png)
        for rank, rep in sorted(replies.items())
        for png in rep.figures
        if show is None or rank in show
    ]
    if not figures:
        return
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is None:
        return
    for _rank, png in figures:
        display(Image(data=png, format="png"))


def run(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int = 4,
    backend: str = "auto",
    timeout: float = 60.0,
    **kwargs: Any,
) -> list[Any]:
    """One shot: start ``world_size`` ranks, call ``fn`` on each, shut down, return the values."""
    with Cluster(world_size=world_size, backend=backend, timeout=timeout) as cluster:
        return cluster.run(fn, *args, **kwargs)


@atexit.register
def _shutdown_all() -> None:
    for cluster in list(_started):
        try:
            cluster.shutdown()
        except Exception:
            pass
