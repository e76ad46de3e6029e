"""The emulated clock: the only clock a rank's code reads while a network is emulated.

On an emulated network the time a lesson reads must be the network's, not the
laptop's. So, as SimGrid's SMPI runs real MPI programs on simulated time
(Degomme et al., IEEE TPDS 2017), each rank keeps an emulated clock:

- **Messages** cost what the link model says (:mod:`labsupport.netem.link`);
  a message carries its emulated send time, and the receiver computes its
  arrival from it. A collective's steps chain on emulated time.
- **Work between calls** costs the CPU time the thread spends on it
  (``time.thread_time()``): a rank waiting for a core shared with other ranks,
  or for gloo over loopback, pays nothing. torch runs one intra-op thread per
  rank on an emulated network (:func:`install` sets it), so a matrix product's
  CPU time is all in the calling thread. Emulated accelerator work
  (:func:`compute`) costs exactly what it says, and burns no CPU.
- **Waiting** for an operation moves the clock to the operation's end (a join),
  if that is later than now. Nothing sleeps through wire time: a 16 MiB
  all-reduce over 50 MB/s is as quick as gloo over loopback, yet reads 0.5 s.

While a network is emulated, ``time.perf_counter()``, ``perf_counter_ns()``,
``monotonic()`` and ``monotonic_ns()`` return this clock in the threads that run
your code (the rank's main thread, and the threads that complete futures), so
timing code stays the code you would run on a cluster; ``time.sleep(x)`` still
sleeps, and moves the clock by ``x``. ``time.time()`` and every other thread
(the launcher's watchdogs, torch's store, gloo, netem's own threads) keep the
real clock, so a hang is still a hang, reported on the real clock.

Each thread has its own clock (``threading.local``): a collective issued from a
future's callback starts when that callback runs, and a thread joins another's
time only through an operation it waits for. Every rank's clock starts at 0
when the network is installed; the first barrier lines them up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

#: The real clocks, for code that must never read the emulated one.
REAL = SimpleNamespace(
    perf_counter=time.perf_counter,
    perf_counter_ns=time.perf_counter_ns,
    monotonic=time.monotonic,
    monotonic_ns=time.monotonic_ns,
    sleep=time.sleep,
)


class _ThreadClock(threading.local):
    """One thread's clock: ``at`` (emulated s) when its CPU time was ``cpu``."""

    def __init__(self) -> None:
        self.emulated = False  # whether time.perf_counter() & co. read this clock
        self.at = _LATEST.value  # a new thread starts at the latest time any thread has seen
        self.cpu = time.thread_time()
        self.hidden = 0  # depth of netem's own work: its CPU time is not charged
        self.charged = 0.0  # CPU seconds charged to the clock so far


class _Latest:
    value = 0.0


class _Total:
    """CPU seconds charged by every thread of the process (their clocks' sum)."""

    lock = threading.Lock()
    value = 0.0


_LATEST = _Latest()
_TOTAL = _Total()
_THREAD = _ThreadClock()
_INSTALLED = threading.Event()


def now() -> float:
    """This thread's emulated time (s): the last join plus the CPU time used since."""
    c = _THREAD
    if c.hidden:
        return c.at
    return c.at + (time.thread_time() - c.cpu)


def _settle(at: float) -> float:
    c = _THREAD
    cpu = time.thread_time()
    if not c.hidden:
        c.charged += cpu - c.cpu
        with _TOTAL.lock:
            _TOTAL.value += cpu - c.cpu
    c.at, c.cpu = at, cpu
    if at > _LATEST.value:
        _LATEST.value = at
    return at


def cpu_charged(every_thread: bool = False) -> float:
    """The CPU seconds this thread's clock has charged so far (all but netem's own work).

    ``every_thread=True``: the sum over the process's threads (this one up to now, the
    others up to their last join), e.g. a step's compute plus its comm hooks' callbacks.
    """
    c = _THREAD
    mine = 0.0 if c.hidden else time.thread_time() - c.cpu
    return (_TOTAL.value if every_thread else c.charged) + mine


def join(t: float) -> float:
    """An operation this thread waited for ended at emulated time ``t``: now is at least ``t``."""
    return _settle(max(now(), t))


def advance(seconds: float) -> float:
    """Move this thread's clock ``seconds`` forward (emulated work); returns the new time."""
    if seconds < 0:
        raise ValueError(f"cannot move the clock backwards ({seconds} s)")
    return _settle(now() + seconds)


@contextmanager
def hidden() -> Iterator[None]:
    """netem's own host work on the caller's thread: it costs no emulated time.

    Inside the block :func:`now` stands still (joins still move it); the CPU
    time spent inside is not charged to the thread.
    """
    c = _THREAD
    if not c.hidden:
        _settle(now())
    c.hidden += 1
    try:
        yield
    finally:
        c.hidden -= 1
        if not c.hidden:
            c.cpu = time.thread_time()


def installed() -> bool:
    """Whether this process emulates a network (the clocks are patched)."""
    return _INSTALLED.is_set()


def emulated() -> bool:
    """Whether the calling thread reads the emulated clock."""
    return _INSTALLED.is_set() and _THREAD.emulated


def adopt(at: float | None = None) -> None:
    """Make the calling thread read the emulated clock, starting at ``at`` if given."""
    _THREAD.emulated = True
    if at is not None:
        _settle(at)


def compute(seconds: float) -> None:
    """Emulated accelerator work of ``seconds``: on an emulated network the clock moves by
    exactly that and nothing runs; elsewhere (a real run) the thread sleeps that long."""
    if emulated():
        advance(seconds)
    else:
        REAL.sleep(seconds)


# ---------------------------------------------------------------- the patched time functions
def _perf_counter() -> float:
    return now() if _THREAD.emulated else REAL.perf_counter()


def _perf_counter_ns() -> int:
    return int(now() * 1e9) if _THREAD.emulated else REAL.perf_counter_ns()


def _monotonic() -> float:
    return now() if _THREAD.emulated else REAL.monotonic()


def _monotonic_ns() -> int:
    return int(now() * 1e9) if _THREAD.emulated else REAL.monotonic_ns()


def _sleep(seconds: float) -> None:
    REAL.sleep(seconds)
    if _THREAD.emulated:
        advance(max(0.0, seconds))


def install() -> None:
    """From now on this process emulates time (idempotent); the calling thread reads it.

    Patches the ``time`` module's clocks and ``sleep`` (see the module docstring)
    and sets torch to one intra-op thread, whose CPU time is the calling thread's.
    """
    if not _INSTALLED.is_set():
        time.perf_counter, time.perf_counter_ns = _perf_counter, _perf_counter_ns
        time.monotonic, time.monotonic_ns = _monotonic, _monotonic_ns
        time.sleep = _sleep
        _INSTALLED.set()
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:  # the clock itself needs no torch
            pass
    adopt(0.0)


def uninstall() -> None:
    """Give the process back its real clocks (tests; a rank normally keeps its network)."""
    if _INSTALLED.is_set():
        time.perf_counter, time.perf_counter_ns = REAL.perf_counter, REAL.perf_counter_ns
        time.monotonic, time.monotonic_ns = REAL.monotonic, REAL.monotonic_ns
        time.sleep = REAL.sleep
        _INSTALLED.clear()
    _THREAD.emulated = False
