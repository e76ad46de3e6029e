"""Scaling efficiency: the definitions, a step-time model, and runs on 1, 2, 4... ranks.

With ``T_p`` the time of one step (or of a job) on ``p`` ranks:

* **strong scaling** (the global batch fixed, split over the ranks):
  ``E = T_1 / (p · T_p)`` - 1 when ``p`` ranks are ``p`` times faster;
* **weak scaling** (the batch *per rank* fixed, the global batch grows with p):
  ``E = T_1 / T_p`` - 1 when a step takes as long on ``p`` ranks as on one;
* from a table of **throughputs** ``X_p`` (samples/s) at a fixed per-rank batch:
  ``E = X_p / (p · X_1)`` - the same as weak scaling, since ``X_p = p·b / T_p``.

Data parallelism without overlap: a step is the rank's compute, then one all-reduce of
the ``n`` gradient bytes. :func:`model_step` prices it with the α-β model;
:func:`emulated_steps` measures it on the ranks of a netem group, with the compute
*emulated*: each rank's clock moves by its share of the batch at a per-sample rate
measured on this machine (:func:`time_per_sample`; :func:`labsupport.netem.compute`),
so 4 ranks on a 2-core laptop behave like 4 machines; the all-reduce is real, over the
emulated network, and timed on the same emulated clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from labsupport import costmodel, trace
from labsupport.bench.timing import device_clock, line_up, slowest, time_iterations
from labsupport.ddp.model import Config, loss_fn, make_model
from labsupport.netem.clock import compute as emulate_compute


def strong_efficiency(t1: float, tp: float, p: int) -> float:
    """``T_1 / (p·T_p)``: the global batch fixed, split over ``p`` ranks."""
    return t1 / (p * tp)


def weak_efficiency(t1: float, tp: float) -> float:
    """``T_1 / T_p``: the batch per rank fixed."""
    return t1 / tp


def throughput_efficiency(x1: float, xp: float, p: int) -> float:
    """``X_p / (p·X_1)`` from throughputs (samples per second) on 1 and ``p`` ranks."""
    return xp / (p * x1)


#: All-reduce algorithms :func:`model_step` knows: the ring, the binomial tree (reduce then
#: broadcast, ``2 lg p·(α + nβ)``) and NCCL's double binary tree (pipelined in 4 blocks;
#: :func:`labsupport.costmodel.double_binary_tree_all_reduce_time`), a different algorithm.
ALLREDUCE: dict[str, Callable[..., float]] = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "double binary tree": costmodel.double_binary_tree_all_reduce_time,
}

#: A popular article on HCCL (the course's reference article), its scaling section:
#: cards -> (ms per step, the efficiency it prints). Strong scaling from 120 ms on 1 card.
ARTICLE_STRONG = {1: (120.0, 1.0), 8: (18.0, 0.833), 16: (11.0, 0.682), 32: (9.0, 0.521)}
#: The same article's batch-size table: batch -> (communication share, printed efficiency).
ARTICLE_BATCH = {16: (0.25, 0.68), 32: (0.15, 0.78), 64: (0.08, 0.85), 128: (0.04, 0.90)}


def print_recomputed(table: dict[int, tuple[float, float]] = ARTICLE_STRONG) -> None:
    """Recompute a strong-scaling table ``{cards: (ms per step, printed efficiency)}``.

    One line per row after the first: ``T_1 / (p·T_p)`` against what was printed.
    """
    (c1, (t1, _)), *rows = sorted(table.items())
    for p, (t, printed) in rows:
        e = t1 * c1 / (p * t)  # strong_efficiency, relative to c1 cards
        verdict = "" if abs(e - printed) < 0.001 else "  <- wrong"
        print(f"{p:>2} cards: {t1:g} / ({p} × {t:g}) = {e:.1%}; printed {printed:.1%}{verdict}")


def model_step(
    compute: float, nbytes: int, p: int, alpha: float, beta: float, algorithm: str = "ring"
) -> float:
    """Seconds per step: ``compute`` then an all-reduce of ``nbytes`` (none on one rank)."""
    if p == 1:
        return compute
    return compute + ALLREDUCE[algorithm](nbytes, p, alpha, beta)


def break_even_batch(
    per_sample: float, fixed: float, nbytes: int, p: int, alpha: float, beta: float
) -> float:
    """Per-rank batch at which compute (``fixed + per_sample·b``) equals the ring all-reduce."""
    return max(0.0, (costmodel.ring_all_reduce_time(nbytes, p, alpha, beta) - fixed) / per_sample)


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

    A step: ``compute`` seconds of emulated forward and backward (:func:`labsupport.netem.compute`:
    the emulated clock moves, nothing runs; a sleep off an emulated network), then a real
    all-reduce of ``nbytes`` among those ranks. Timed as every loop of the course is
    (:func:`labsupport.bench.timing.time_iterations`): ranks lined up before each step,
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
