"""The one way the course times distributed work: the loop notebook 06 teaches.

Every timed loop in ``labsupport`` (the benchmark, the DDP versions, the
compression hooks, the scaling experiments, the capstone) goes through
:func:`time_iterations`, so they all follow the same rules:

1. warm-up iterations first, untimed (buffers, connections, DDP's buckets);
2. line the ranks up: device synchronize, barrier, device synchronize;
3. read the clock, run, device synchronize, read the clock again;
4. report each iteration's time on the *slowest* rank (one ``all_reduce`` MAX
   after the loop, so the reduction is not inside what is timed).

The clock is ``time.perf_counter()``, looked up when it is called: on a real
machine the host clock, and on an emulated network (:mod:`labsupport.netem`)
the rank's emulated clock, which that package installs in its place. Code
copied from here to a cluster times the same way there.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from labsupport.runtime.device import IterationClock, synchronize


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed iteration: the slowest rank's (``seconds``) and this rank's."""

    seconds: list[float]
    mine: list[float]

    @property
    def median(self) -> float:
        """The median over iterations of the slowest rank's time."""
        return statistics.median(self.seconds)

    @property
    def mean(self) -> float:
        """The mean over iterations of the slowest rank's time."""
        return statistics.fmean(self.seconds)


def device_clock(device: torch.device | str = "cpu") -> float:
    """``time.perf_counter()`` once the work queued on ``device`` is done."""
    synchronize(device)
    return time.perf_counter()


def line_up(device: torch.device | str = "cpu", group: dist.ProcessGroup | None = None) -> float:
    """Synchronize, barrier, synchronize, read the clock: every rank starts together."""
    synchronize(device)
    dist.barrier(group=group)
    return device_clock(device)


def slowest(
    values: list[float], device: torch.device | str = "cpu", group: dist.ProcessGroup | None = None
) -> list[float]:
    """Each value's maximum over the ranks of ``group`` (one ``all_reduce`` MAX)."""
    if not values:
        return []
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.cpu().tolist()


def time_iterations(
    step: Callable[[int], Any],
    iters: int,
    *,
    warmup: int = 1,
    device: torch.device | str = "cpu",
    group: dist.ProcessGroup | None = None,
    each: bool = True,
    before: Callable[[int], Any] | None = None,
    over_ranks: bool = True,
) -> Timing:
    """Time ``step(i)`` for ``i = warmup .. warmup + iters - 1`` on every rank of ``group``.

    ``step(i)`` for ``i < warmup`` runs first, untimed. With ``each=True`` (a
    training step) the ranks are lined up before every iteration and each is
    timed on its own. With ``each=False`` (nccl-tests' way, for a collective
    called back to back) they are lined up once; each iteration is then the
    time between marks (device events on an NPU or GPU, the clock on the CPU),
    and no barrier separates one iteration from the next. ``before(i)``, if
    given, runs before each timed iteration, outside the clock (e.g. to make a
    batch; only with ``each=True``). ``over_ranks=False`` skips the final
    ``all_reduce`` (``seconds`` is then this rank's, for a caller that combines
    ranks its own way). Every rank of ``group`` must call this with the same arguments.
    """
    if iters < 1:
        raise ValueError(f"iters must be at least 1; got {iters}")
    if before is not None and not each:
        raise ValueError("before= needs each=True (back-to-back iterations have no gap for it)")
    for i in range(warmup):
        step(i)
    mine: list[float] = []
    if each:
        for i in range(warmup, warmup + iters):
            if before is not None:
                before(i)
            start = line_up(device, group)
            step(i)
            mine.append(device_clock(device) - start)
    else:
        clock = IterationClock(device, iters)
        line_up(device, group)
        clock.mark()
        for i in range(warmup, warmup + iters):
            step(i)
            clock.mark()
        synchronize(device)
        mine = clock.intervals()
    return Timing(seconds=slowest(mine, device, group) if over_ranks else mine, mine=mine)
