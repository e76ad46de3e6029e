"""Scaling efficiency: the definitions and a step-time model.

Start at :func:`strong_efficiency` and :func:`weak_efficiency` (``T_p``: the time of one
step, or of a job, on ``p`` ranks), then :func:`model_step`.
"""

from __future__ import annotations

from collections.abc import Callable

from labsupport import (
    _moved,  # the old names' aliases (one release)
    costmodel,
)


def strong_efficiency(t1: float, tp: float, p: int) -> float:
    """``T_1 / (p·T_p)``: the global batch fixed, split over ``p`` ranks (strong scaling).

    1 when ``p`` ranks are ``p`` times faster.
    """
    return t1 / (p * tp)


def weak_efficiency(t1: float, tp: float) -> float:
    """``T_1 / T_p``: the batch per rank fixed, the global batch grows with p (weak scaling).

    1 when a step takes as long on ``p`` ranks as on one.
    """
    return t1 / tp


def throughput_efficiency(x1: float, xp: float, p: int) -> float:
    """``X_p / (p·X_1)`` from throughputs (samples per second) on 1 and ``p`` ranks.

    At a fixed per-rank batch ``b`` this is weak scaling's efficiency, since ``X_p = p·b / T_p``.
    """
    return xp / (p * x1)


#: All-reduce algorithms :func:`model_step` knows: the ring, the binomial tree (reduce then
#: broadcast, ``2 lg p·(α + nβ)``) and NCCL's double binary tree (pipelined in 4 blocks;
#: :func:`labsupport.costmodel.double_binary_tree_all_reduce_time`), a different algorithm.
ALLREDUCE: dict[str, Callable[..., float]] = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "double binary tree": costmodel.double_binary_tree_all_reduce_time,
}

#: A constructed example of a mistake seen in circulation (notebook 08): cards -> (ms per
#: step, the efficiency it prints). Strong scaling from 120 ms on 1 card.
ARTICLE_STRONG = {1: (120.0, 1.0), 8: (18.0, 0.833), 16: (11.0, 0.682), 32: (9.0, 0.521)}
#: A second one, a batch-size table: batch -> (communication share, printed efficiency).
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
    """Seconds per step: ``compute`` then an all-reduce of ``nbytes`` (none on one rank).

    Data parallelism without overlap, priced with the α-β model. The runtime's
    :mod:`labsupport.runtime.experiments.scaling_runs` measures it on the ranks of an
    emulated network, with the compute emulated (each rank's clock moves by its share of
    the batch at a per-sample rate measured on this machine), so 4 ranks on a 2-core laptop
    behave like 4 machines.
    """
    if p == 1:
        return compute
    return compute + ALLREDUCE[algorithm](nbytes, p, alpha, beta)


def break_even_batch(
    per_sample: float, fixed: float, nbytes: int, p: int, alpha: float, beta: float
) -> float:
    """Per-rank batch at which compute (``fixed + per_sample·b``) equals the ring all-reduce."""
    return max(0.0, (costmodel.ring_all_reduce_time(nbytes, p, alpha, beta) - fixed) / per_sample)


def __getattr__(name: str) -> object:
    """Names this package exported before the split into core and runtime (one release)."""
    return _moved.attribute(__name__, name)
