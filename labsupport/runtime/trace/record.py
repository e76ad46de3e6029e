"""Record spans on one rank: named compute regions and collectives, from issue to completion.

A span is a tuple ``(rank, lane, name, start_ns, end_ns, info)``. Recording one
costs two clock reads and a ``list.append`` (a few microseconds), so it can
stay on in a training loop. The clock is :func:`time.perf_counter_ns`, looked up at each
reading: on a real machine a system-wide monotonic clock on one host (CLOCK_MONOTONIC on
Linux, mach_absolute_time on macOS, QueryPerformanceCounter on Windows), so the ranks of
one machine read the same clock and their spans line up without any correction (across
hosts they do not; :func:`labsupport.runtime.trace.align` can line the ranks up on a barrier); on
an emulated network (:mod:`labsupport.netem`) the rank's emulated clock, which every rank
starts at 0 and messages keep consistent.

Compute::

    with trace.span("forward"):          # a context manager ...
        loss = model(x).sum()

    @trace.span("optimizer")             # ... or a decorator
    def step(): ...

    trace.begin("backward"); ...; trace.end("backward")   # from hooks

Communication, from issue to completion::

    work = trace.comm(dist.all_reduce, grad, async_op=True, info="bucket 3")
    ...
    work.wait()

The issue time is read just before the call. The completion time is read by a
callback on the Work's future (``Work.get_future().then``), which gloo runs on
its worker thread when the collective finishes, whether or not anybody waits
for it yet. Point-to-point Work on gloo has no future; then the span ends when
``wait()`` returns (the returned object wraps the Work for that). A span
includes time spent queued behind earlier collectives (gloo runs them on a
small pool of threads) and waiting for the slowest peer: see
:func:`labsupport.runtime.trace.compare_ends`.

On an NPU or a GPU the host clock does not see the device: a compute span
measures the launch of kernels unless the device is synchronized inside it,
and a Work's future completes once later work can be ordered after the
collective (as early as its launch), not when the device has finished it.
There, read device time with ``torch.profiler``.

Why markers rather than ``torch.profiler`` for the course: with gloo, the
profiler shows ``c10d::allreduce_`` on the main thread (for an async call,
only the launch) and ``gloo:all_reduce`` on a worker thread (the execution,
not the time spent queued behind another bucket); neither is "issued here,
done there", and neither carries the learner's names (bucket 3, step 7).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

#: Lanes used when none is given: compute regions, and collectives.
COMPUTE, COMM = "compute", "comm"


def now_ns() -> int:
    """The clock every span uses: ``time.perf_counter_ns()`` (see the module docstring)."""
    return time.perf_counter_ns()


class Span(NamedTuple):
    """One region on one rank, times in nanoseconds of :data:`now_ns` (or aligned)."""

    rank: int
    lane: str
    name: str
    start_ns: int
    end_ns: int
    info: str = ""

    @property
    def duration_ns(self) -> int:
        """``end_ns - start_ns``."""
        return self.end_ns - self.start_ns


def _current_rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return 0


class _WaitRecorder:
    """Wraps a Work without a future: the span ends when ``wait()`` returns."""

    def __init__(self, work: Any, finish: Callable[[], None]) -> None:
        self._work, self._finish, self._done = work, finish, False

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = self._work.wait(*args, **kwargs)
        if not self._done:
            self._done = True
            self._finish()
        return result

    def __getattr__(self, name: str) -> Any:  # is_completed, exception, ...
        return getattr(self._work, name)


class Recorder:
    """Collects the spans of one rank. Each rank process has its own (see :func:`default`)."""

    def __init__(self) -> None:
        self._spans: list[tuple[str, str, int, int, str]] = []  # (lane, name, start, end, info)
        self._open: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()  # completion callbacks run on gloo's threads
        self._generation = 0  # bumped by reset(): late callbacks of older work are dropped

    def add(
        self, name: str, start_ns: int, end_ns: int, lane: str = COMPUTE, info: str = ""
    ) -> None:
        """Record a finished span (times from :data:`now_ns`)."""
        if end_ns < start_ns:
            raise ValueError(f"span {name!r} ends ({end_ns}) before it starts ({start_ns})")
        with self._lock:
            self._spans.append((lane, name, start_ns, end_ns, info))

    def begin(self, name: str, lane: str = COMPUTE) -> None:
        """Open a span; :meth:`end` with the same name and lane closes it."""
        key = (lane, name)
        if key in self._open:
            raise RuntimeError(f"span {name!r} in lane {lane!r} is already open: end it first")
        self._open[key] = now_ns()

    def end(self, name: str, lane: str = COMPUTE, info: str = "") -> None:
        """Close the span opened by :meth:`begin` with this name and lane."""
        stop = now_ns()
        start = self._open.pop((lane, name), None)
        if start is None:
            opened = ", ".join(f"{n!r} ({ln})" for ln, n in self._open) or "none"
            raise RuntimeError(
                f"trace.end({name!r}, lane={lane!r}): no such span was begun "
                f"(open spans: {opened}); call trace.begin({name!r}) first"
            )
        self.add(name, start, stop, lane, info)

    def span(self, name: str, lane: str = COMPUTE, info: str = "") -> Any:
        """A context manager (``with rec.span("forward"):``) that is also a decorator."""
        return _SpanContext(self, name, lane, info)

    def watch(self, work: Any, name: str, start_ns: int, lane: str = COMM, info: str = "") -> Any:
        """Record ``name`` from ``start_ns`` until ``work`` (a Work or a Future) completes.

        Returns what to wait on: ``work`` itself when it has a future, else a
        wrapper whose ``wait()`` ends the span.
        """
        generation = self._generation

        def finish(_fut: Any = None) -> None:
            if generation == self._generation:
                self.add(name, start_ns, now_ns(), lane, info)

        future = work
        if not hasattr(work, "then"):  # a Work: its future, if it has one
            try:
                future = work.get_future()
            except RuntimeError:  # gloo p2p: "getFuture is not implemented"
                return _WaitRecorder(work, finish)
        future.then(finish)
        return work

    def comm(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        lane: str = COMM,
        info: str = "",
        **kwargs: Any,
    ) -> Any:
        """Call a collective ``fn(*args, **kwargs)`` and record it from issue to completion.

        ``async_op=True``: returns the Work (see :meth:`watch`). Otherwise the
        span is the call itself, and its return value is returned.
        """
        label = name or getattr(fn, "__name__", "collective")
        start = now_ns()
        result = fn(*args, **kwargs)
        if result is None or not (hasattr(result, "wait") or hasattr(result, "then")):
            self.add(label, start, now_ns(), lane, info)
            return result
        return self.watch(result, label, start, lane, info)

    def spans(self, rank: int | None = None) -> list[Span]:
        """This rank's finished spans, by start time (``rank``: default the process group's)."""
        r = _current_rank() if rank is None else rank
        with self._lock:
            raw = list(self._spans)
        return sorted((Span(r, *s) for s in raw), key=lambda s: (s.start_ns, s.end_ns))

    def reset(self) -> None:
        """Forget every span, finished or open (and collectives still in flight)."""
        with self._lock:
            self._generation += 1
            self._spans.clear()
            self._open.clear()

    def __len__(self) -> int:
        return len(self._spans)


class _SpanContext:
    """``with`` and ``@`` for :meth:`Recorder.span` (a fresh start time each time)."""

    def __init__(self, recorder: Recorder, name: str, lane: str, info: str) -> None:
        self._args = (recorder, name, lane, info)
        self._starts: list[int] = []

    def __enter__(self) -> None:
        self._starts.append(now_ns())

    def __exit__(self, *exc: object) -> None:
        recorder, name, lane, info = self._args
        recorder.add(name, self._starts.pop(), now_ns(), lane, info)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper


_default = Recorder()


def default() -> Recorder:
    """The recorder that the module-level functions (``trace.span`` ...) use in this process."""
    return _default
