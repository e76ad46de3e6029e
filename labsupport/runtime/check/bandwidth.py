"""Grader for notebook 06's exercise: fix a broken bandwidth benchmark.

The exercise hands out ``benchmark_all_reduce(x, iters)`` with four classic
bugs (no device synchronize, no warm-up, the fastest rank's time instead of
the slowest's, a wrong busbw factor) and asks for a version whose numbers
agree with ``labsupport.runtime.bench``'s.

On a CPU with gloo most of these bugs change nothing you could measure: gloo's
calls return when the work is done, and the first call is barely slower. So
the grader runs your function, and then the benchmark's own timed loop
(:func:`labsupport.runtime.bench.core.time_case`, after a warm-up call, slowest rank's
time), on a :class:`SimulatedDevice`: a pretend accelerator with a virtual
clock on which, as on an NPU or a GPU,

* ``dist.all_reduce`` returns at once and the work runs later, on the device
  (its cost: a latency plus bytes / bandwidth);
* ``bench.synchronize`` waits (in virtual time) for the device to finish;
* the first all_reduce pays a one-off set-up cost;
* rank r's device is a little slower than rank r - 1's, so the ranks' times differ.

The collectives themselves still run for real, on the real group. The
simulation is deterministic, so yours and the benchmark's times must agree to
a few per cent; when they do not, what you measured says which bug is left.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from labsupport.runtime.check import FAIL, PASS, CheckResult, explain_failure, report
from labsupport.runtime.check.messages import LABELLED
from labsupport.runtime.language import _

LAUNCH_S = 5e-6  # host time to queue one call
LATENCY_S = 50e-6  # device time per all_reduce, before the bytes
BANDWIDTH_BPS = 5e9  # bytes per second on rank 0's device (rank r: 1 + r/2 times slower)
SETUP_S = 0.05  # the first all_reduce also pays this (connections, buffers)


@dataclass
class SimulatedDevice:
    """A virtual clock for the host and a queue for a pretend asynchronous device."""

    rank: int
    host: float = 0.0  # what time.perf_counter() returns, in seconds
    device_free: float = 0.0  # when the device will have finished its queue
    synchronizes: int = 0
    calls: int = 0
    log: list[str] = field(default_factory=list)

    def now(self) -> float:
        """The host clock (time.perf_counter while simulating)."""
        self.host += 1e-9  # strictly increasing, like a real clock
        return self.host

    def sleep(self, seconds: float) -> None:
        """time.sleep while simulating: the host is busy, the device keeps working."""
        self.host += seconds

    def launch(self, nbytes: int) -> None:
        """Queue one all_reduce of ``nbytes`` and return to the host at once."""
        self.host += LAUNCH_S
        cost = (LATENCY_S + nbytes / BANDWIDTH_BPS) * (1 + self.rank / 2)
        if self.calls == 0:
            cost += SETUP_S
        self.calls += 1
        self.device_free = max(self.device_free, self.host) + cost
        self.log.append("all_reduce")

    def synchronize(self, device: Any = None) -> None:
        """Wait until the device's queue is empty."""
        self.synchronizes += 1
        self.host = max(self.host, self.device_free)
        self.log.append("synchronize")

    def Event(self, enable_timing: bool = True) -> _Event:
        """A device event, stamped when the device reaches it."""
        return _Event(self)


class _Event:
    def __init__(self, sim: SimulatedDevice) -> None:
        self.sim, self.stamp = sim, 0.0

    def record(self) -> None:
        self.stamp = max(self.sim.host, self.sim.device_free)

    def elapsed_time(self, other: _Event) -> float:
        return (other.stamp - self.stamp) * 1e3  # milliseconds, as torch's events


@contextlib.contextmanager
def simulated_device(rank: int) -> Iterator[SimulatedDevice]:
    """Inside the block, the clocks (time.perf_counter, monotonic, time), time.sleep,
    bench.synchronize and dist.all_reduce act on a :class:`SimulatedDevice` (the
    all_reduce still runs for real).

    Only the thread that entered the block is simulated; the process's other
    threads (the launcher's, gloo's) keep the real clock.
    """
    import torch.distributed as dist

    from labsupport.runtime import device as bench_device

    sim = SimulatedDevice(rank)
    owner = threading.get_ident()  # other threads of the process keep the real clock
    real = {name: getattr(time, name) for name in ("perf_counter", "monotonic", "time", "sleep")}
    real_all_reduce, real_module = dist.all_reduce, bench_device.device_module

    def clock(name: str) -> Callable[[], float]:
        return lambda: sim.now() if threading.get_ident() == owner else real[name]()

    def sleep(seconds: float) -> None:
        if threading.get_ident() == owner:
            sim.sleep(seconds)
        else:
            real["sleep"](seconds)

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == owner:
            sim.launch(tensor.numel() * tensor.element_size())
        return real_all_reduce(tensor, *args, **kwargs)

    for name in ("perf_counter", "monotonic", "time"):  # whichever clock you read
        setattr(time, name, clock(name))
    time.sleep = sleep
    bench_device.device_module = lambda device: sim
    dist.all_reduce = all_reduce
    try:
        yield sim
    finally:
        for name, function in real.items():
            setattr(time, name, function)
        bench_device.device_module = real_module
        dist.all_reduce = real_all_reduce


def _both_runs(fn: Callable, numel: int, iters: int) -> dict[str, Any]:
    """On every rank: the learner's numbers, then the benchmark's, each on a fresh device."""
    import torch.distributed as dist

    from labsupport.runtime.bench.core import time_case
    from labsupport.runtime.launch import rank_device

    rank, device = dist.get_rank(), rank_device()
    x = torch.ones(numel, device=device)
    with simulated_device(rank) as sim:
        seconds, algbw, busbw = (float(v) for v in fn(x, iters))
    mine = {"seconds": seconds, "algbw": algbw, "busbw": busbw, "syncs": sim.synchronizes}
    with simulated_device(rank) as sim:
        dist.all_reduce(x)  # warm-up
        own = time_case(lambda: dist.all_reduce(x), iters, device)[0]
    everyone = [0.0] * dist.get_world_size()
    dist.all_gather_object(everyone, own)
    return {**mine, "own": own, "slowest": max(everyone), "fastest": min(everyone)}


def check_fixed_benchmark(
    fn: Callable[[torch.Tensor, int], tuple[float, float, float]],
    cluster: Any = None,
    *,
    numel: int = 2**20,
    iters: int = 10,
    name: str = "benchmark_all_reduce",
) -> CheckResult:
    """Compare ``fn(x, iters)`` -> (seconds, algbw GB/s, busbw GB/s) with the benchmark's.

    Both run on every rank of ``cluster`` (the running one by default), on a
    :class:`SimulatedDevice`, for a float32 tensor of ``numel`` elements.
    """
    from labsupport.costmodel import busbw_factor
    from labsupport.runtime.check import cluster_for_check
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster) as running:
            runs = running.call(_both_runs, (fn, numel, iters), timeout=60)
    except (RankError, CollectiveTimeout) as err:
        return explain_failure(err, name, 60)
    p, size = len(runs), numel * 4
    verdict = _diagnose(runs, size, busbw_factor("all_reduce", p))
    if verdict:
        return report(False, f"{FAIL} " + _(LABELLED).format(label=name, problem=verdict))
    r = runs[0]
    agrees = _(
        "{name} agrees with labsupport.runtime.bench on a simulated device ({p} ranks, {size} "
        "bytes): {us:.0f} µs per call, algbw {algbw:.3f} GB/s, busbw {busbw:.3f} GB/s."
    ).format(name=name, p=p, size=size, us=r["seconds"] * 1e6, algbw=r["algbw"], busbw=r["busbw"])
    return report(True, f"{PASS} {agrees}")


def _diagnose(runs: list[dict], size: int, factor: float) -> str | None:
    """What is still wrong, said from the evidence; None when the numbers agree."""
    seconds = [r["seconds"] for r in runs]
    slowest, fastest = runs[0]["slowest"], runs[0]["fastest"]
    times = {"yours": seconds[0] * 1e6, "theirs": slowest * 1e6}
    if any(r["syncs"] == 0 for r in runs):
        return "\n   ".join(
            [
                _("your time is {yours:.0f} µs per call, the benchmark's {theirs:.0f}.").format(
                    **times
                ),
                _(
                    "Your function never synchronized the device: on an NPU or GPU the clock "
                    "then stops when the calls are queued, not when they are done."
                ),
                _("Fix: bench.synchronize(x.device) before each read of the clock."),
            ]
        )
    if max(seconds) - min(seconds) > 1e-3 * max(seconds):
        each = ", ".join(
            _("rank {rank}: {us:.0f} µs").format(rank=i, us=s * 1e6) for i, s in enumerate(seconds)
        )
        return "\n   ".join(
            [
                _("each rank returned its own time ({times}).").format(times=each),
                _(
                    "Report one time for the group: all_reduce the time with ReduceOp.MAX, the "
                    "slowest rank's."
                ),
            ]
        )
    ratio = seconds[0] / slowest
    if abs(ratio - 1) > 0.05:
        if abs(seconds[0] / fastest - 1) < 0.05:
            why = _(
                "your time is {yours:.0f} µs per call, the benchmark's {theirs:.0f} "
                "({ratio:.2f}×): that is the fastest rank's time: combine with ReduceOp.MAX, "
                "not MIN."
            )
        elif ratio < 1:
            why = _(
                "your time is {yours:.0f} µs per call, the benchmark's {theirs:.0f} "
                "({ratio:.2f}×): too short: is the device synchronized after the last call, "
                "before the clock is read?"
            )
        else:
            why = _(
                "your time is {yours:.0f} µs per call, the benchmark's {theirs:.0f} "
                "({ratio:.2f}×): too long: did the first call's set-up land in the timed loop? "
                "Warm up first, then synchronize, barrier, synchronize, and only then start "
                "the clock."
            )
        return why.format(ratio=ratio, **times)
    algbw = size / seconds[0] / 1e9
    if abs(runs[0]["algbw"] / algbw - 1) > 1e-3:
        return _(
            "algbw is {got:.4g} GB/s, but S / t = {size} B / {us:.0f} µs = {algbw:.4g} GB/s "
            "(GB = 1e9 bytes)."
        ).format(got=runs[0]["algbw"], size=size, us=seconds[0] * 1e6, algbw=algbw)
    if abs(runs[0]["busbw"] / (algbw * factor) - 1) > 1e-3:
        got = runs[0]["busbw"] / runs[0]["algbw"]
        return _(
            "busbw / algbw is {ratio:.4g}; for all_reduce on {p} ranks it is 2(p-1)/p. Where "
            "that comes from: notebook 03's counting argument."
        ).format(ratio=got, p=len(runs))
    return None
