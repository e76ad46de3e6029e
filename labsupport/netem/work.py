"""The Work a netem operation returns: done when its data is here and its emulated time has come.

Every operation of the "netem" group (:mod:`labsupport.netem.backend`) knows,
once its messages have arrived, the emulated time at which it ends: its
*deadline*. The caller's ``wait()`` sleeps until then in its own thread, so
the only wake-up on the way back to the caller is the one at the deadline
(host work done before it, such as gloo over loopback or Python, is hidden).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def sleep_until(t: float) -> None:
    """Sleep (not spin) until ``time.monotonic()`` reaches ``t``."""
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


_late = threading.local()


def emulated_now() -> float:
    """This thread's emulated "now": the wall clock less how late its last wait woke up.

    A thread that sleeps until a deadline wakes a little after it, and later
    still when more ranks than cores wake at the same instant (4 ranks on 2
    cores). On separate machines that delay would not exist, so the next
    operation this thread starts is timed from the deadline plus the time the
    thread spent since it woke, not from the late wake-up. Only the lateness
    of a wait is taken off, never time the thread spent computing or sleeping.
    """
    return time.monotonic() - getattr(_late, "by", 0.0)


def wake_at(deadline: float, since: float) -> None:
    """Sleep until ``deadline``; remember how late this thread woke (see :func:`emulated_now`).

    ``since`` is when the thread began to wait: a deadline that had already
    passed then makes no lateness.
    """
    sleep_until(deadline)
    _late.by = max(0.0, time.monotonic() - max(deadline, since))


class EmulatedWork(dist.Work):
    """Done when the data is here *and* the emulated clock has reached ``deadline``.

    ``wait()`` sleeps in the caller's own thread until the deadline: one
    wake-up at the deadline, not a hand-over from a helper thread that slept.
    A collective's data is made ready by the collective thread (:meth:`ready`);
    a point-to-point Work gets ``settle``, which waits for gloo and returns the
    deadline, run by the first ``wait()`` (no thread per message).
    """

    def __init__(self, result: list[torch.Tensor], settle: Callable[[], float] | None = None,
                 inner: Any = None) -> None:  # fmt: skip
        super().__init__()
        self._result, self._settle, self._inner = result, settle, inner
        self._ready, self._lock = threading.Event(), threading.Lock()
        self._deadline, self._error = math.inf, None

    def ready(self, deadline: float, error: BaseException | None = None) -> None:
        """The data is here (or ``error`` happened); complete at emulated time ``deadline``."""
        self._deadline, self._error = deadline, error
        self._ready.set()

    def _run_settle(self) -> None:
        with self._lock:
            if self._settle is not None and not self._ready.is_set():
                try:
                    self.ready(self._settle())
                except BaseException as exc:  # noqa: BLE001 - raised by wait()
                    self.ready(-math.inf, exc)

    def wait(self, timeout: Any = None) -> bool:  # noqa: D102
        since = time.monotonic()
        self._run_settle()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        wake_at(self._deadline, since)
        return True

    def is_completed(self) -> bool:  # noqa: D102
        if self._inner is not None and self._inner.is_completed():
            self._run_settle()
        return self._ready.is_set() and time.monotonic() >= self._deadline

    def get_future(self) -> torch.futures.Future:
        """A future completed at the deadline (by a helper thread, so ``then`` works)."""
        fut: torch.futures.Future = torch.futures.Future()

        def run() -> None:
            try:
                self.wait()
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                fut.set_exception(exc)
            else:
                fut.set_result(self._result)  # never None: set_result(None) crashes torch 2.13

        threading.Thread(target=run, name="netem-future", daemon=True).start()
        return fut
