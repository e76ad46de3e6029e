"""Scaling experiments on the ranks: a measured per-sample rate, steps on 1, 2, 4... ranks.

The definitions and the step-time model are the teaching core's :mod:`labsupport.scaling`;
these functions measure what it predicts, on an emulated network or a real one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from labsupport.runtime import trace
from labsupport.runtime.bench.timing import device_clock, line_up, slowest, time_iterations
from labsupport.runtime.emulator.clock import compute as emulate_compute
from labsupport.runtime.experiments.workload import Config, loss_fn, make_model


def time_per_sample(
    forward_backward: Callable[[int], None], batches: Sequence[int], repeats: int = 5
) -> tuple[float, float]:
    """(seconds per sample, fixed seconds) fitted to the median time of ``forward_backward(b)``.

    A least-squares line through (b, median seconds) for each batch size ``b``.
    """
    xs, ys = [], []
    for b in batches:
        forward_backward(b)  # warm-up
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            forward_backward(b)
            samples.append(time.perf_counter() - start)
        xs.append(float(b))
        ys.append(statistics.median(samples))
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, max(0.0, intercept)


_GROUPS: dict[int, Any] = {}


def first_ranks_group(ranks: int) -> dist.ProcessGroup | None:
    """A group of ranks ``0 .. ranks-1``; every rank must call this, in the same order.

    Returns the group on its members and None on the others (``WORLD`` for all ranks).
    """
    world = dist.get_world_size()
    if not 1 <= ranks <= world:
        raise ValueError(f"ranks must be between 1 and the world size {world}; got {ranks}")
    if ranks == world:
        return dist.group.WORLD
    if ranks not in _GROUPS:  # made once per size: a group costs connections and threads
        _GROUPS[ranks] = dist.new_group(list(range(ranks)))
    return _GROUPS[ranks] if dist.get_rank() < ranks else None


def emulated_steps(
    ranks: int, compute: float, nbytes: int, steps: int = 5, warmup: int = 1
) -> float | None:
    """On every rank: median seconds per step on ranks ``0..ranks-1`` (None on the others).

    A step: ``compute`` seconds of emulated forward and backward
    (:func:`labsupport.runtime.emulator.compute`: the emulated clock moves, nothing runs;
    a sleep off an emulated network), then a real
    all-reduce of ``nbytes`` among those ranks. Timed as every loop of the course is
    (:func:`labsupport.runtime.bench.timing.time_iterations`): ranks lined up before each step,
    the slowest rank's time.
    """
    group = first_ranks_group(ranks)
    if group is None:
        return None
    grads = torch.ones(max(1, nbytes // 4))

    def step(_: int) -> None:
        emulate_compute(compute)
        dist.all_reduce(grads, group=group)

    return time_iterations(step, steps, warmup=warmup, group=group).median


def compute_and_comm(
    ranks: int, local_batch: int, cfg: Config, steps: int = 3, warmup: int = 1
) -> dict[str, Any] | None:
    """On every rank: real compute, then one all-reduce of all gradients, on ranks ``0..ranks-1``.

    Returns, on the members, the median seconds of compute (forward and backward of
    ``local_batch`` rows) and of the all-reduce (the slowest rank's), and this rank's
    trace spans of the timed steps; None on the other ranks. A barrier between the two
    keeps the waiting for a slower rank's compute out of the all-reduce's time.
    """
    group = first_ranks_group(ranks)
    if group is None:
        return None
    model = make_model(cfg)
    x, y = torch.randn(local_batch, cfg.in_features), torch.randn(local_batch, cfg.out_features)
    parts: dict[str, list[float]] = {"compute": [], "all_reduce": []}
    for step in range(warmup + steps):
        if step == warmup:
            trace.reset()
        t0 = line_up(group=group)
        with trace.span("compute", info=f"batch {local_batch}"):
            model.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
        t1 = device_clock()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        with trace.span("barrier", lane=trace.COMM):  # so the all-reduce below is all wire time
            start = line_up(group=group)
        trace.comm(dist.all_reduce, flat, group=group, name="all_reduce")
        t2 = device_clock()
        if step >= warmup:
            parts["compute"].append(t1 - t0)
            parts["all_reduce"].append(t2 - start)
    medians = slowest([statistics.median(v) for v in parts.values()], group=group)
    return {**dict(zip(parts, medians, strict=True)), "spans": trace.spans()}
