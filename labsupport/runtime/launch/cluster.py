"""A persistent group of N local worker processes, driven from the kernel.

``Cluster`` starts one fresh Python interpreter per rank (no fork: fork is
unsafe once a device runtime or threads exist), has them join a process group,
and then sends them work: source text (``exec``, what ``%%ranks`` uses) or a
function (``run``; notebook functions and lambdas travel by value with
cloudpickle). It shows every rank's output as it comes, returns the values,
and deals with the failures a learner will meet on purpose:

* a rank raises            -> :class:`RankError` with the remote traceback;
* a rank dies              -> :class:`RankError` naming the exit code or signal;
* nobody finishes in time  -> :class:`CollectiveTimeout` with each rank's stack;
* the stop button          -> :class:`CellInterrupted` (ranks killed if they do not stop).

After a timeout, a death, or ranks left blocked by a failing peer, the error
is reported at once and a fresh group replaces the old one in the background
(a standby group, once there has been a failure), so the next cell starts
clean without waiting for N torch imports.

Safety: each worker talks to the kernel over its own socketpair (nothing
listens for it), the rendezvous store listens on 127.0.0.1 only, gloo is kept
on the loopback interface, and every worker exits when the kernel's end of its
stdin pipe closes, so a killed kernel leaves no orphans.
"""

from __future__ import annotations

import atexit
import itertools
import linecache
import os
from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle

from labsupport.runtime.backend import BackendChoice, detect_backend
from labsupport.runtime.language import N_, _, get_language
from labsupport.runtime.launch.errors import (
    CellInterrupted,
    ClusterStopped,
    CollectiveTimeout,
    RankError,
    unpicklable_call,
)
from labsupport.runtime.launch.group import Group
from labsupport.runtime.launch.lifecycle import Groups
from labsupport.runtime.launch.options import DEFAULT_OUTPUT_LIMIT, ClusterOptions
from labsupport.runtime.launch.process import WorkerProcess
from labsupport.runtime.launch.protocol import Outcome, cell_sources, run_request
from labsupport.runtime.launch.streaming import RankPrinter, display_figures
from labsupport.runtime.launch.values import RankValues

#: Told in every error after which the ranks were replaced.
RESTART_NOTE = N_("the ranks were restarted: names defined in earlier cells are gone")
RESTART_NOT_STARTED = N_("the ranks were stopped, and new ones could not be started yet: {why}")

# Running clusters, oldest first. The newest one still running is "current":
# when a temporary cluster (a grader's, say) shuts down, the one before it is
# current again. (Strong references: a cluster started by %%ranks lives here.)
_started: list[Cluster] = []
# Every cell gets its own file name, so tracebacks show the right source.
_cell_numbers = itertools.count(1)


def current_cluster() -> Cluster | None:
    """The cluster that ``%%ranks`` uses: the most recently started one still running."""
    for cluster in reversed(_started):
        if not cluster._stopped:
            return cluster
    return None


def _forget(cluster: Cluster) -> None:
    _started[:] = [c for c in _started if c is not cluster]


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
    ``standby``: keep a spare group ready so a failure costs no start-up
    (True: from the start; None: from the first failure on, for gloo groups of
    at most 4 ranks; False: never). Only for gloo: NPUs and GPUs take one
    process each, so there the new group starts as soon as the old one is gone.
    ``output_limit``: characters of output one cell shows, all ranks together.
    """

    def __init__(
        self,
        world_size: int = 4,
        backend: str = "auto",
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
        network: Any = None,
        *,
        standby: bool | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> None:
        if os.name == "nt":
            raise RuntimeError(
                "the launcher needs Linux or macOS (it passes sockets to its workers and reads "
                "their stacks with signals); on Windows, run the course inside WSL2."
            )
        if network is not None:  # an emulated network: checked now, carried to the ranks as JSON
            from labsupport.runtime.emulator.cluster import network_env

            network, backend, _ = network_env(network, world_size, backend, env or {})
        self.options = ClusterOptions(
            world_size, backend, timeout, env or {}, output_limit, network=network
        )
        self.choice: BackendChoice = detect_backend(world_size, backend)
        self.show: list[int] | None = None
        self._stopped = False
        self._task_id = 0
        self._groups = Groups(self.options, self.choice, standby)
        _started.append(self)

    # The options, as attributes (kept across restarts).
    world_size = property(lambda self: self.options.world_size)
    timeout = property(lambda self: self.options.timeout)
    env = property(lambda self: dict(self.options.env))
    requested_backend = property(lambda self: self.options.backend)
    backend = property(lambda self: self.choice.backend)
    network = property(lambda self: self.options.network)

    # ------------------------------------------------------------------ life cycle
    @property
    def alive(self) -> bool:
        """True while the cluster is not shut down and every rank is running."""
        return not self._stopped and self._groups.alive

    @property
    def standby_policy(self) -> bool | None:
        """True: a spare group is kept; None: one will be after a failure; False: never."""
        return self._groups.policy

    @property
    def _workers(self) -> list[WorkerProcess]:  # the current ranks (tests look at pids)
        return self._groups.workers

    def banner(self) -> str:
        """One short line: what is running ("started 4 gloo ranks on cpu")."""
        ranks = "rank" if self.world_size == 1 else "ranks"
        return f"{self.world_size} {self.backend} {ranks} on {self.choice.device_type}"

    def shutdown(self) -> None:
        """Stop every rank and free everything (safe to call twice)."""
        self._stopped = True
        self._groups.shutdown()
        _forget(self)

    def restart(self, reason: str = "restarted on request") -> None:
        """Replace every rank with a fresh one (all state defined on the ranks is lost)."""
        self._replace(failure=False)
        self._ensure_ready()
        if self not in _started:
            _started.append(self)
        print(
            f"[labsupport] cluster {reason}: {self.banner()}; names defined in earlier "
            "cells are gone",
            flush=True,
        )

    def _replace(self, failure: bool = True) -> str | None:
        """Swap in a new group now (see :meth:`Groups.replace`); do not wait for it."""
        self._stopped = False
        return self._groups.replace(failure)

    def _ensure_ready(self) -> Group:
        """Wait for the current group (a start-up failure is raised here)."""
        try:
            return self._groups.ensure_ready()
        except KeyboardInterrupt:
            raise CellInterrupted(
                restarted=True,
                message="interrupted while the ranks were starting; the next cell starts them",
            ) from None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running" if self.alive else "restarting"
        return f"Cluster(world_size={self.world_size}, backend={self.backend!r}, {state})"

    def __reduce__(self) -> Any:
        raise TypeError(
            "a Cluster lives in the notebook's kernel and cannot be sent to the ranks; "
            "on a rank, use torch.distributed (dist) directly."
        )

    # ------------------------------------------------------------------ running code
    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``fn(*args, **kwargs)`` on every rank; return the values, index = rank.

        The list is a :class:`~labsupport.runtime.launch.values.RankValues`: when every rank
        returned None, a notebook cell that ends with this call shows nothing.
        """
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
        args, kwargs = tuple(args), dict(kwargs or {})
        try:
            payload = cloudpickle.dumps((fn, args, kwargs))
        except Exception as exc:
            raise unpicklable_call(fn, args, kwargs, exc) from None
        return self._dispatch(("call", payload, cell_sources(fn), get_language()), timeout, show)

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
        ``%%ranks cell``); each call gets a number of its own, ``<name N>``.
        """
        __tracebackhide__ = True
        filename = f"<{name or 'rank-cell'} {next(_cell_numbers)}>"
        compile(source, filename, "exec")  # a syntax error stops here, before any rank runs
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return self._dispatch(("exec", source, filename, get_language()), timeout, show)

    def _dispatch(self, request: tuple, timeout: float | None, show: list[int] | None) -> list[Any]:
        __tracebackhide__ = True
        if self._stopped:
            raise ClusterStopped(
                f"this cluster was shut down ({self!r}); start a new one, e.g. "
                f"lab.Cluster(world_size={self.world_size}), or call its restart()."
            )
        timeout = self.options.cell_timeout(timeout)
        current = self._groups.current
        if current is not None and current.ready and not current.alive:
            self._replace()
            print(f"[labsupport] a rank had exited since the last cell; {RESTART_NOTE}")
        group = self._ensure_ready()
        show = self.show if show is None else list(show)
        self._task_id += 1
        printer = RankPrinter([w.readers for w in group.workers], show)
        outcome = run_request(group, self._task_id, request, timeout, printer)
        display_figures(outcome.replies, show)
        return self._conclude(outcome, timeout)

    def _conclude(self, outcome: Outcome, timeout: float) -> list[Any]:
        """The values, or the error; replace the group first if it cannot go on."""
        __tracebackhide__ = True
        restarted = bool(outcome.blocked or outcome.died)
        note = None
        if restarted:
            why = self._replace()  # the new group starts in the background; report now
            note = _(RESTART_NOTE) if why is None else _(RESTART_NOT_STARTED).format(why=why)
        errors = {r: rep.error for r, rep in outcome.replies.items() if rep.error is not None}
        if outcome.interrupted:
            raise CellInterrupted(outcome.stacks, restarted=restarted)
        if errors:
            dead = [r for r, rep in outcome.replies.items() if rep.status == "died"]
            first = dead[0] if dead else next(iter(errors))  # replies are in arrival order
            raise RankError(errors, outcome.stacks, restarted=restarted, first=first, note=note)
        if outcome.blocked:
            raise CollectiveTimeout(timeout, outcome.stacks, note=note)
        return RankValues(outcome.replies[r].value for r in range(self.world_size))


def run(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int = 4,
    backend: str = "auto",
    timeout: float = 60.0,
    **kwargs: Any,
) -> list[Any]:
    """One shot: start ``world_size`` ranks, call ``fn`` on each, shut down, return the values."""
    with Cluster(world_size=world_size, backend=backend, timeout=timeout, standby=False) as cluster:
        return cluster.run(fn, *args, **kwargs)


@atexit.register
def _shutdown_all() -> None:
    for cluster in list(_started):
        try:
            cluster.shutdown()
        except Exception:
            pass
