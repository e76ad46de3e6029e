"""The Work and Future a netem operation returns: done when its data is here, at its emulated end.

Every operation of the "netem" group (:mod:`labsupport.runtime.emulator.backend`) knows,
once its messages have arrived, the emulated time at which it ends: its
*deadline*. ``wait()`` blocks (on the real clock) until the data is here, then
moves the waiting thread's emulated clock to the deadline
(:func:`labsupport.runtime.emulator.clock.join`). Nothing sleeps through wire time.

Futures carry the time too (:class:`EmulatedFuture`): ``wait()`` and
``value()`` join the caller's clock; callbacks given to ``then`` run on a
helper thread whose clock starts at the deadline, so a collective issued from a
callback (PowerSGD's) starts when the callback would run; the future ``then``
returns ends when its callback has returned, in emulated time. A backward pass
that waits inside torch's C++ for such futures (DDP's Reducer) joins them at
its end (:func:`_join_at_end_of_backward`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from labsupport.runtime.emulator import clock


class EmulatedWork(dist.Work):
    """Done when the data is here; ``wait()`` moves the caller's clock to ``deadline``.

    A collective's data is made ready by the collective thread (:meth:`ready`);
    a point-to-point Work gets ``settle``, which waits for gloo and returns the
    deadline, run by the first ``wait()`` (no thread per message).
    """

    def __init__(
        self,
        result: list[torch.Tensor],
        settle: Callable[[], float] | None = None,
        inner: Any = None,
        issued: float = 0.0,
        operations: list | None = None,
    ) -> None:
        super().__init__()
        self._result, self._settle, self._inner = result, settle, inner
        self._ready, self._lock = threading.Event(), threading.Lock()
        self._deadline, self._error = math.inf, None
        self.issued = issued  # the emulated time it was called
        self._operations = operations or []  # its records in emulator.operations() logs

    def ready(self, deadline: float, error: BaseException | None = None) -> None:
        """The data is here (or ``error`` happened); the operation ends at ``deadline``."""
        self._deadline, self._error = deadline, error
        for op in self._operations:
            op.end = deadline if error is None else None
        self._ready.set()

    def _run_settle(self) -> None:
        with self._lock:
            if self._settle is not None and not self._ready.is_set():
                try:
                    self.ready(self._settle())
                except BaseException as exc:
                    self.ready(-math.inf, exc)

    def deadline(self) -> float:
        """Block until the data is here; the emulated end time (raises the operation's error)."""
        with clock.hidden():
            self._run_settle()
            self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._deadline

    def wait(self, timeout: Any = None) -> bool:
        clock.join(self.deadline())
        return True

    def is_completed(self) -> bool:
        if self._inner is not None and self._inner.is_completed():
            self._run_settle()
        return self._ready.is_set() and clock.now() >= self._deadline

    def get_future(self) -> torch.futures.Future:
        """A future done at the deadline (see :class:`EmulatedFuture`)."""
        fut = EmulatedFuture()
        _during_backward(fut)
        fut._start(self.deadline, lambda: self._result, self.issued)
        return fut


class EmulatedFuture(torch.futures.Future):
    """A torch Future that knows the emulated time it completes at (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.end = math.inf
        self._done_here = threading.Event()

    def _start(self, until: Callable[[], float], result: Callable[[], Any], at: float) -> None:
        """On a helper thread starting at emulated ``at``: ``until()`` (the end), then complete."""

        def run() -> None:
            clock.adopt(at)
            try:
                end = clock.join(until())
                value = result()
            except BaseException as exc:
                self.end = clock.now()
                self._done_here.set()
                self.set_exception(exc)
            else:
                self.end = end
                self._done_here.set()
                self.set_result(value)  # never None: set_result(None) crashes torch 2.13

        threading.Thread(target=run, name="netem-future", daemon=True).start()

    def wait(self) -> Any:
        value = super().wait()
        self._done_here.wait()
        clock.join(self.end)
        return value

    def value(self) -> Any:
        out = super().value()
        self._done_here.wait()
        clock.join(self.end)
        return out

    def then(self, callback: Callable[[torch.futures.Future], Any]) -> torch.futures.Future:
        """A future of ``callback(self)``, run on a helper thread at this future's end."""
        child = EmulatedFuture()
        _during_backward(child)

        def run_callback() -> Any:
            self._done_here.wait()
            try:
                torch._C.Future.wait(self)  # completed in torch's eyes too
            except BaseException:
                pass
            clock.join(self.end)
            return callback(self)

        child._start_callback(run_callback)
        return child

    def _start_callback(self, body: Callable[[], Any]) -> None:
        def run() -> None:
            clock.adopt(0.0)
            try:
                value = body()
            except BaseException as exc:
                self.end = clock.join(0.0)  # settles the thread's CPU time
                self._done_here.set()
                self.set_exception(exc)
            else:
                self.end = clock.join(0.0)
                self._done_here.set()
                self.set_result(value)

        threading.Thread(target=run, name="netem-callback", daemon=True).start()


# ------------------------------------------------------- futures torch waits for in C++
_backward = threading.local()


def _during_backward(fut: EmulatedFuture) -> None:
    """Note a future made during a backward pass on an emulated thread (DDP's comm hooks).

    torch's DDP Reducer waits for its buckets' futures in C++ at the end of the
    backward pass, where no Python ``wait`` runs; so the first such future of a
    pass queues an end-of-backward callback that joins the thread's clock with
    every future noted (see :func:`_join_at_end_of_backward`).
    """
    if not clock.emulated():
        return
    task = torch._C._current_graph_task_id()
    if task < 0:
        return
    noted = getattr(_backward, "futures", None)
    if getattr(_backward, "task", None) != task or noted is None:
        _backward.task, _backward.futures = task, [fut]
        torch.autograd.Variable._execution_engine.queue_callback(_join_at_end_of_backward)
    else:
        noted.append(fut)


def _join_at_end_of_backward() -> None:
    # Queued by the first future of the pass, possibly before DDP queued its own
    # finalize_backward: queue once more, so that the join runs after it.
    torch.autograd.Variable._execution_engine.queue_callback(_join_done)


def _join_done() -> None:
    """Join the clock with the futures of this pass that are complete (DDP waited for them)."""
    futures, _backward.futures, _backward.task = (
        getattr(_backward, "futures", None) or [],
        None,
        None,
    )
    ends = [f.end for f in futures if f._done_here.is_set()]
    if ends:
        clock.join(max(ends))


# ------------------------------------------------ torch.futures' helpers, on emulated time
_REAL_COLLECT_ALL = torch.futures.collect_all


def _wait_all(futures: list[torch.futures.Future]) -> list:
    """``torch.futures.wait_all``: each future's own ``wait()``, so each joins the clock."""
    return [fut.wait() for fut in futures]


def _collect_all(futures: list[torch.futures.Future]) -> torch.futures.Future:
    """``torch.futures.collect_all``: done when every future is, at the latest one's end."""
    combined = _REAL_COLLECT_ALL(futures)
    if not any(isinstance(f, EmulatedFuture) for f in futures):
        return combined
    out = EmulatedFuture()

    def until() -> float:
        combined.wait()
        for f in futures:
            if isinstance(f, EmulatedFuture):
                f._done_here.wait()
        return max((getattr(f, "end", 0.0) for f in futures), default=0.0)

    out._start(until, lambda: list(futures), clock.now())
    return out


def install_futures() -> None:
    """Make ``torch.futures.wait_all`` and ``collect_all`` wait on emulated time too.

    torch's own wait in C++, where no Python ``wait`` runs and the clock would not move:
    a rank that waits for an all-reduce through them must pay for it, as through ``wait()``.
    """
    torch.futures.wait_all, torch.futures.collect_all = _wait_all, _collect_all
