"""Closed forms of the α-β-γ model (Thakur, Rabenseifner & Gropp 2005): time of each algorithm.

α is the latency of one message (s), β the time per byte on a link (s/B), γ the time per
byte to reduce (s/B); ``n`` is the buffer size in bytes, ``p`` the number of ranks. The tree
and doubling forms assume p is a power of two. See REFERENCES.md, "Cost models and algorithms".
"""

from __future__ import annotations

from collections.abc import Callable
from math import log2

# ---------------------------------------------------------------------------
# Closed forms (n bytes, p ranks). For all-gather and reduce-scatter, n is the
# whole buffer (p times one rank's piece), as nccl-tests counts it.
# ---------------------------------------------------------------------------


def ring_allreduce(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring (reduce-scatter + all-gather): 2(p-1)α + 2n(p-1)/p·β + n(p-1)/p·γ."""
    return 2 * (p - 1) * alpha + 2 * n * (p - 1) / p * beta + n * (p - 1) / p * gamma


def ring_reduce_scatter(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring reduce-scatter: (p-1)α + n(p-1)/p·(β+γ)."""
    return (p - 1) * alpha + n * (p - 1) / p * (beta + gamma)


def ring_allgather(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring all-gather: (p-1)α + n(p-1)/p·β."""
    return (p - 1) * alpha + n * (p - 1) / p * beta


def whole_buffer_ring_allreduce(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Ring that passes the whole buffer around (old PyTorch tutorial): (p-1)(α + nβ + nγ)."""
    return (p - 1) * (alpha + n * beta + n * gamma)


def naive_allreduce(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Reduce to a root, then send back, one message at a time: 2(p-1)α + 2(p-1)nβ + (p-1)nγ.

    Not in the MPICH paper: it is what the one-port rule of :func:`cost` gives
    when the root receives p-1 buffers and then sends p-1 buffers.
    """
    return 2 * (p - 1) * alpha + 2 * (p - 1) * n * beta + (p - 1) * n * gamma


def binomial_broadcast(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree broadcast: lg p·α + n·lg p·β."""
    return log2(p) * (alpha + n * beta)


def binomial_reduce(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce: lg p·(α + nβ + nγ)."""
    return log2(p) * (alpha + n * beta + n * gamma)


def recursive_doubling_allreduce(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling all-reduce: lg p·(α + nβ + nγ)."""
    return log2(p) * (alpha + n * beta + n * gamma)


def recursive_halving_reduce_scatter(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive halving reduce-scatter: lg p·α + n(p-1)/p·(β+γ)."""
    return log2(p) * alpha + n * (p - 1) / p * (beta + gamma)


def recursive_doubling_allgather(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling all-gather: lg p·α + n(p-1)/p·β."""
    return log2(p) * alpha + n * (p - 1) / p * beta


def rabenseifner_allreduce(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Rabenseifner (halving reduce-scatter, doubling all-gather).

    2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ.
    """
    return 2 * log2(p) * alpha + 2 * n * (p - 1) / p * beta + n * (p - 1) / p * gamma


ClosedForm = Callable[..., float]

#: The closed form of each shipped schedule, by the schedule's name.
CLOSED_FORMS: dict[str, ClosedForm] = {
    "ring_all_reduce": ring_allreduce,
    "ring_reduce_scatter": ring_reduce_scatter,
    "ring_all_gather": ring_allgather,
    "naive_all_reduce": naive_allreduce,
    "binomial_broadcast": binomial_broadcast,
    "binomial_reduce": binomial_reduce,
    "recursive_doubling_all_reduce": recursive_doubling_allreduce,
    "recursive_halving_reduce_scatter": recursive_halving_reduce_scatter,
    "recursive_doubling_all_gather": recursive_doubling_allgather,
    "rabenseifner_all_reduce": rabenseifner_allreduce,
}


# ---------------------------------------------------------------------------
# Added for notebook 04 and labsupport.netem: the binomial-tree all-reduce and
# the two-level (hierarchical) all-reduce.
# ---------------------------------------------------------------------------


def tree_allreduce(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial reduce then binomial broadcast: 2 lg p·(α + nβ) + lg p·nγ.

    The sum of the binomial reduce and broadcast rows of Thakur et al. (2005).
    """
    return 2 * log2(p) * (alpha + n * beta) + log2(p) * n * gamma


def hierarchical_allreduce(
    n: float,
    p: int,
    alpha: float,
    beta: float,
    gamma: float = 0.0,
    *,
    ranks_per_node: int,
    inter_alpha: float | None = None,
    inter_beta: float | None = None,
) -> float:
    """Two-level all-reduce (ring reduce-scatter in each node, ring all-reduce across, all-gather).

    With k = ranks_per_node and m = p / k nodes, α, β within a node and α', β'
    between nodes (default: the same)::

        2(k-1)(α + n/k·β) + (k-1)/k·nγ                  (reduce-scatter + all-gather in a node)
        + 2(m-1)α' + 2(n/k)(m-1)/m·β' + (n/k)(m-1)/m·γ   (ring all-reduce of n/k across nodes)

    The ring rows of Thakur et al. (2005) applied level by level; this is what
    HCCL runs on multi-server Ascend systems and ASTRA-sim calls localBWAware.
    """
    k = ranks_per_node
    m = p // k
    a2 = alpha if inter_alpha is None else inter_alpha
    b2 = beta if inter_beta is None else inter_beta
    within = 2 * (k - 1) * (alpha + n / k * beta) + (k - 1) / k * n * gamma
    across = ring_allreduce(n / k, m, a2, b2, gamma) if m > 1 else 0.0
    return within + across
