"""Record every collective a block of code calls through ``torch.distributed``, without changing it.

::

    with trace.collectives() as calls:
        loss.backward()                 # your DDP's hooks call dist.all_reduce(...)
    calls[0].name, calls[0].nbytes, calls[0].in_backward, calls[0].waited_ns

Within the block, each function named in :data:`TRACED` is replaced, in the
``torch.distributed`` module, by one that calls the real function and records:

* a span on the trace's "comm" lane, from the call to completion (as
  :func:`labsupport.runtime.trace.comm` records one), so the call shows on the timeline;
* a :class:`Call`: the collective's name, its size, whether it was asynchronous,
  whether it was issued (and later waited for) *during backward* (inside an autograd
  node, such as a gradient hook), and when its ``wait()`` was first called.

An asynchronous call returns the real Work wrapped so that ``wait()`` is seen;
everything else (``get_future``, ``is_completed``) passes through. Code that
imported a function under its own name (``from torch.distributed import
all_reduce``), and collectives called from C++ (torch's own DDP), are not seen.
Blocks may nest: each records the calls made inside it (one span per call).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from labsupport import dist_names
from labsupport.runtime.trace import record
from labsupport.runtime.trace.record import COMM, Recorder, default

#: The functions of ``torch.distributed`` that :func:`collectives` records: the core's
#: list (:data:`labsupport.dist_names.TRACED`, which says why it is not every call).
TRACED = dist_names.TRACED

_inside = threading.local()


def _now() -> int:
    return record.now_ns()  # looked up at each call: the clock in force (see trace.record)


@dataclass
class Call:
    """One recorded collective call (times in ns of :func:`labsupport.runtime.trace.now_ns`)."""

    name: str
    numel: int  # elements of the largest tensor argument
    nbytes: int
    async_op: bool
    in_backward: bool  # issued inside an autograd node (a gradient hook)
    issued_ns: int
    waited_ns: int | None = None  # when wait() was first called (a blocking call: its end)
    waited_in_backward: bool = False

    def outstanding_at(self, t_ns: int) -> bool:
        """Issued at or before ``t_ns`` and not yet waited for then."""
        return self.issued_ns <= t_ns and (self.waited_ns is None or self.waited_ns > t_ns)


def _in_backward() -> bool:
    import torch

    return torch._C._current_autograd_node() is not None


class _TracedWork:
    """A Work whose first ``wait()`` is written into its :class:`Call`."""

    def __init__(self, work: Any, call: Call) -> None:
        self._work, self._call = work, call

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        if self._call.waited_ns is None:
            self._call.waited_ns = _now()
            self._call.waited_in_backward = _in_backward()
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # get_future, is_completed, ...
        return getattr(self._work, name)


def _size(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, int]:
    import torch

    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            tensors += [t for t in a if isinstance(t, torch.Tensor)]
    big = max(tensors, key=lambda t: t.numel(), default=None)
    return (0, 0) if big is None else (big.numel(), big.numel() * big.element_size())


def _traced(name: str, fn: Any, calls: list[Call], recorder: Recorder, lane: str) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = getattr(_inside, "call", None)
        if outer is not None:  # an enclosing collectives() block records this call: share it
            calls.append(outer)
            return fn(*args, **kwargs)
        numel, nbytes = _size(args, kwargs)
        call = Call(
            name, numel, nbytes, bool(kwargs.get("async_op", False)), _in_backward(), _now()
        )
        calls.append(call)
        _inside.call = call
        try:
            result = fn(*args, **kwargs)
        finally:
            _inside.call = None
        info = f"{nbytes / 1e3:.0f} kB"
        if result is None or not hasattr(result, "wait"):  # blocking: done when it returns
            call.waited_ns = _now()
            call.waited_in_backward = call.in_backward
            recorder.add(name, call.issued_ns, call.waited_ns, lane, info)
            return result
        return _TracedWork(recorder.watch(result, name, call.issued_ns, lane, info), call)

    wrapper.__wrapped__ = fn
    return wrapper


@contextlib.contextmanager
def collectives(
    names: Sequence[str] = TRACED, recorder: Recorder | None = None, lane: str = COMM
) -> Iterator[list[Call]]:
    """Within the block, record the ``torch.distributed`` collectives in ``names`` (see above).

    Yields the list the calls are appended to, in the order they were issued.
    ``recorder``: default this process's (:func:`labsupport.runtime.trace.default`).
    """
    import torch.distributed as dist

    unknown = [n for n in names if not callable(getattr(dist, n, None))]
    if unknown:
        raise ValueError(f"torch.distributed has no collective named {', '.join(unknown)}")
    calls: list[Call] = []
    rec = recorder or default()
    originals = {n: getattr(dist, n) for n in names}
    for n, fn in originals.items():
        setattr(dist, n, _traced(n, fn, calls, rec, lane))
    try:
        yield calls
    finally:
        for n, fn in originals.items():
            setattr(dist, n, fn)
