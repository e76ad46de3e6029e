"""The measurement: warm up, line up, time, aggregate over ranks, verify.

For each size, out-of-place then in-place (nccl-tests' order):

1. fill the buffers, run ``warmup_iters`` untimed calls (the first calls pay
   for connection set-up and memory registration);
2. synchronize the device, barrier, synchronize again: every rank starts the
   clock together, with nothing left over in its queue;
3. run ``iters`` calls back to back, marking each one, then synchronize and
   stop the clock: time = elapsed / iters on this rank;
4. combine the ranks' times as ``average`` says (default: the mean, as
   nccl-tests; use 3 for the max, the time the slowest rank saw);
5. ``check`` times: fill again, one call, count wrong elements, sum over ranks.

Every rank runs :func:`run_sweep` and gets the same results back; rank 0 may
stream the table as it goes.
"""

from __future__ import annotations

import os
import socket
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

from labsupport.runtime.bench.cases import make_case
from labsupport.runtime.bench.collectives import COLLECTIVES, busbw_factor, count_and_size
from labsupport.runtime.bench.options import BenchOptions
from labsupport.runtime.bench.timing import time_iterations
from labsupport.runtime.device import synchronize


@dataclass
class Result:
    """One row half of the table: one collective, one size, out-of-place or in-place.

    ``time_us`` is None (printed N/A) when the collective has no in-place form;
    ``wrong`` is None when results were not checked. ``iter_us`` holds each
    timed iteration, combined over ranks like ``time_us``; ``median_us`` is
    their median, which a busy machine's outliers move less than the mean.
    """

    collective: str
    size: int
    count: int
    type: str
    redop: str
    root: int
    nranks: int
    in_place: bool
    time_us: float | None
    algbw: float | None
    busbw: float | None
    wrong: int | None
    median_us: float | None = None
    iter_us: list[float] = field(default_factory=list)
    backend: str = ""

    def to_dict(self) -> dict:
        """The result as plain data."""
        return asdict(self)


@dataclass
class Sweep:
    """Everything one run produced: what was asked, who ran it, the results."""

    options: BenchOptions
    nranks: int
    backend: str
    devices: list[str]  # one line per rank: host, pid, device
    results: list[Result] = field(default_factory=list)

    @property
    def wrong(self) -> int:
        """Wrong elements summed over every checked result."""
        return sum(r.wrong or 0 for r in self.results)


def this_device() -> torch.device:
    """This rank's device: the launcher's answer, the same under torchrun and ``Cluster``."""
    from labsupport.runtime.backend import rank_device

    return rank_device()


def _combine(per_rank: torch.Tensor, average: int) -> torch.Tensor:
    """Combine a (ranks, k) tensor of times over ranks as nccl-tests' ``-a`` says."""
    if average == 0:
        return per_rank[0]
    if average == 1:
        return per_rank.mean(dim=0)
    if average == 2:
        return per_rank.min(dim=0).values
    return per_rank.max(dim=0).values


def _gather_times(
    mean_s: float, iter_s: list[float], average: int, device: torch.device
) -> list[float]:
    """[mean, iter_0, iter_1, ...] in microseconds, combined over ranks."""
    mine = torch.tensor([mean_s, *iter_s], dtype=torch.float32, device=device) * 1e6
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return _combine(torch.stack(everyone).cpu().double(), average).tolist()


def _sum_over_ranks(value: int, device: torch.device) -> int:
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return int(t.item())


def time_case(
    run: Callable[[], None], iters: int, device: torch.device
) -> tuple[float, list[float]]:
    """(seconds per iteration, each iteration's seconds) of ``iters`` back-to-back calls.

    The ranks are lined up once, then the calls run back to back, as nccl-tests
    does (:func:`labsupport.runtime.bench.timing.time_iterations` with ``each=False``);
    the times are this rank's (:func:`measure` combines ranks as ``-a`` says).
    """
    timing = time_iterations(
        lambda _: run(), iters, warmup=0, device=device, each=False, over_ranks=False
    )
    return sum(timing.mine) / iters, timing.mine


def measure(
    options: BenchOptions, nbytes: int, in_place: bool, device: torch.device, backend: str = ""
) -> Result:
    """Time and check one collective at one size (every rank calls this together)."""
    info = COLLECTIVES[options.collective]
    n = dist.get_world_size()
    itemsize = torch.empty(0, dtype=options.dtype).element_size()
    count, size = count_and_size(options.collective, nbytes, itemsize, n)
    op = options.op if info.reduces else "copy"  # the input pattern of data movers
    row = dict(
        collective=options.collective,
        size=size,
        count=count,
        type=options.datatype,
        redop=options.op if info.reduces else "none",
        root=options.root if info.rooted else -1,
        nranks=n,
        in_place=in_place,
        backend=backend,
    )
    if in_place and not info.in_place:
        return Result(**row, time_us=None, algbw=None, busbw=None, wrong=None)

    case = make_case(options.collective, count, options.dtype, device, in_place, op, options.root)
    case.fill()
    for _ in range(options.warmup_iters):
        case.run()
    mean_s, iter_s = time_case(case.run, options.iters, device)
    time_us, *iter_us = _gather_times(mean_s, iter_s, options.average, device)
    algbw = size / 1e9 / (time_us / 1e6) if time_us > 0 else 0.0

    wrong = None
    for _ in range(options.check):
        case.fill()
        case.run()
        synchronize(device)
        if options.inject_fault and dist.get_rank() == 0:
            case.out.view(-1)[: options.inject_fault] += 1  # a deliberate fault, for tests
        wrong = _sum_over_ranks(case.wrong(), device)
        if wrong:
            break
    return Result(
        **row,
        time_us=time_us,
        algbw=algbw,
        busbw=algbw * busbw_factor(options.collective, n),
        wrong=wrong,
        median_us=statistics.median(iter_us),
        iter_us=iter_us,
    )


def describe_ranks(device: torch.device) -> list[str]:
    """One line per rank (rank order): host, pid and device, gathered from every rank."""
    host = socket.gethostname()
    mine = f"Rank {dist.get_rank():2d} Pid {os.getpid():6d} on {host:>10} device {device}"
    lines: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(lines, mine)
    return [str(x) for x in lines]


def check_group(options: BenchOptions, nranks: int) -> None:
    """Raise ValueError if ``options`` cannot run on ``nranks`` ranks (too few, bad root)."""
    info = COLLECTIVES[options.collective]
    if nranks < info.min_ranks:
        raise ValueError(
            f"{options.collective} needs at least {info.min_ranks} ranks; this group has {nranks}"
        )
    if info.rooted and options.root >= nranks:
        raise ValueError(f"root {options.root} is not a rank of this {nranks}-rank group")


def start_sweep(options: BenchOptions, device: torch.device | None = None) -> Sweep:
    """Check that the group can run ``options``; return an empty Sweep naming the ranks."""
    if not dist.is_initialized():
        raise RuntimeError(
            "no process group: call this on every rank of a group (cluster.run, %%ranks, "
            "torchrun), or use labsupport.runtime.bench.benchmark(cluster, ...)"
        )
    check_group(options, dist.get_world_size())
    device = device if device is not None else this_device()
    return Sweep(options, dist.get_world_size(), str(dist.get_backend()), describe_ranks(device))


def measure_size(
    options: BenchOptions, nbytes: int, device: torch.device | None = None
) -> tuple[Result, Result]:
    """(out-of-place, in-place) results for one size (every rank calls this together)."""
    device = device if device is not None else this_device()
    backend = str(dist.get_backend())
    oop = measure(options, nbytes, False, device, backend)
    return oop, measure(options, nbytes, True, device, backend)


def run_sweep(
    options: BenchOptions,
    device: torch.device | None = None,
    on_start: Callable[[Sweep], None] | None = None,
    on_row: Callable[[Result, Result], None] | None = None,
) -> Sweep:
    """Run the whole sweep on this rank (the process group must be up); every rank returns it.

    ``on_start(sweep)`` is called once before the first size and ``on_row(out_of_place,
    in_place)`` after each size: rank 0 uses them to stream the table.
    """
    device = device if device is not None else this_device()
    sweep = start_sweep(options, device)
    if on_start is not None:
        on_start(sweep)
    for nbytes in options.sizes():
        pair = measure_size(options, nbytes, device)
        sweep.results.extend(pair)
        if on_row is not None:
            on_row(*pair)
    return sweep
