"""The alpha-beta-gamma cost model: closed forms, and the cost of any schedule.

alpha is the latency of one message (s), beta the time per byte on a link
(s/B), gamma the time per byte to reduce (s/B); ``n`` is the buffer size in
bytes and ``p`` the number of ranks. The closed forms are the ones of Thakur,
Rabenseifner & Gropp (2005), "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), as listed in the course's FACTS.md; the
tree and doubling ones assume p is a power of two.

:func:`cost` counts what a :class:`~labsupport.schedules.Schedule` really does
(bytes and messages per rank and per step) and turns that into a time with one
rule, the model's usual one: in a step every rank can send one stream and
receive one stream at once (full duplex, one port), so a step lasts as long as
its busiest rank::

    step time = max over ranks of  alpha * messages + beta * bytes + gamma * bytes reduced

where messages and bytes are the larger of what the rank sends and receives.
For the shipped schedules this rule gives back the closed forms exactly
(tests/test_costmodel.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import log2

import numpy as np

from labsupport.schedules import Schedule, chunk_bounds

# ---------------------------------------------------------------------------
# Closed forms (n bytes, p ranks). For all-gather and reduce-scatter, n is the
# whole buffer (p times one rank's piece), as in FACTS.md.
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
# The cost of a schedule.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What a schedule moves, per step (rows) and per rank (columns). Bytes may be fractional.

    Build it with :func:`cost`; get a time with :meth:`time`.
    """

    name: str
    nbytes: float
    sent: np.ndarray  # bytes each rank sends in each step
    received: np.ndarray  # bytes each rank receives in each step
    reduced: np.ndarray  # bytes each rank adds into its buffer in each step
    messages_out: np.ndarray  # messages each rank sends in each step
    messages_in: np.ndarray  # messages each rank receives in each step

    @property
    def steps(self) -> int:
        """Number of steps."""
        return self.sent.shape[0]

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.sent.shape[1]

    @property
    def sent_per_rank(self) -> np.ndarray:
        """Total bytes each rank sends."""
        return self.sent.sum(axis=0)

    @property
    def received_per_rank(self) -> np.ndarray:
        """Total bytes each rank receives."""
        return self.received.sum(axis=0)

    def step_times(self, alpha: float, beta: float, gamma: float = 0.0) -> np.ndarray:
        """Time of each step: its busiest rank's alpha*messages + beta*bytes + gamma*reduced."""
        if self.steps == 0:
            return np.zeros(0)
        per_rank = (
            alpha * np.maximum(self.messages_out, self.messages_in)
            + beta * np.maximum(self.sent, self.received)
            + gamma * self.reduced
        )
        return per_rank.max(axis=1)

    def time(self, alpha: float, beta: float, gamma: float = 0.0) -> float:
        """Modelled time of the whole schedule, in seconds if alpha, beta, gamma are."""
        return float(self.step_times(alpha, beta, gamma).sum())


def chunk_bytes(nbytes: float, num_chunks: int, itemsize: int | None = None) -> np.ndarray:
    """Size in bytes of each chunk of an ``nbytes`` buffer.

    With ``itemsize`` (bytes per element) the buffer is cut as the executed
    schedule cuts it, whole elements per chunk (``torch.tensor_split``); without
    it, into equal fractional pieces, as the closed forms assume (n/p each).
    """
    if itemsize is None:
        return np.full(num_chunks, nbytes / num_chunks)
    numel, rest = divmod(int(nbytes), itemsize)
    if rest:
        raise ValueError(f"{nbytes} bytes is not a whole number of {itemsize}-byte elements")
    return np.diff(chunk_bounds(numel, num_chunks)).astype(float) * itemsize


def cost(schedule: Schedule, nbytes: float, itemsize: int | None = None) -> Cost:
    """Count the bytes and messages each rank sends, receives and reduces in each step.

    ``nbytes`` is the size of one rank's buffer; see :func:`chunk_bytes` for ``itemsize``.
    """
    p, steps = schedule.world_size, len(schedule.steps)
    offsets = np.concatenate([[0.0], np.cumsum(chunk_bytes(nbytes, schedule.num_chunks, itemsize))])
    sent, received, reduced = (np.empty((steps, p)) for _ in range(3))
    messages_out, messages_in = (np.empty((steps, p), dtype=np.int32) for _ in range(2))
    for i, st in enumerate(schedule.steps):
        size = offsets[st.stop] - offsets[st.start]
        sent[i] = np.bincount(st.src, weights=size, minlength=p)
        received[i] = np.bincount(st.dst, weights=size, minlength=p)
        reduced[i] = np.bincount(st.dst, weights=size * st.reduce, minlength=p)
        messages_out[i] = np.bincount(st.src, minlength=p)
        messages_in[i] = np.bincount(st.dst, minlength=p)
    return Cost(schedule.name, nbytes, sent, received, reduced, messages_out, messages_in)


def schedule_time(
    schedule: Schedule, nbytes: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Modelled time of a schedule on an ``nbytes`` buffer (shorthand for ``cost(...).time``)."""
    return cost(schedule, nbytes).time(alpha, beta, gamma)


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
