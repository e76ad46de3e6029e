"""The alpha-beta-gamma cost model: closed forms, and the cost of any schedule.

alpha is the latency of one message (s), beta the time per byte on a link
(s/B), gamma the time per byte to reduce (s/B); ``n`` is the buffer size in
bytes and ``p`` the number of ranks. The closed forms are the ones of Thakur,
Rabenseifner & Gropp (2005), "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1) (see REFERENCES.md); the
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

Two blocks serve measurements: :func:`busbw_factor` (nccl-tests' algbw-to-busbw
factors) and :func:`fit_alpha_beta` (α and β fitted to benchmark results, which
:mod:`labsupport.bench` and :mod:`labsupport.viz` both use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import log2

import numpy as np

from labsupport.schedules import Schedule, chunk_bounds

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
# Bus bandwidth: the factor that turns a measured algbw into busbw.
# (Here rather than in bench so that bench and viz both import it from below.)
# ---------------------------------------------------------------------------

#: busbw / algbw on p ranks, as nccl-tests defines it (doc/PERFORMANCE.md).
BUSBW_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda p: 2 * (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "all_to_all": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
    "reduce": lambda p: 1.0,
    "sendrecv": lambda p: 1.0,
}


def busbw_factor(collective: str, p: int) -> float:
    """busbw / algbw for ``collective`` on ``p`` ranks, as nccl-tests defines it.

    An all-reduce must move each element 2(p-1) times over p links (the
    counting argument of notebook 03), so an optimal algorithm takes
    (S/B)·2(p-1)/p: multiplying algbw = S/t by that factor gives a number
    comparable with the link bandwidth B, whatever the algorithm.
    """
    if collective not in BUSBW_FACTORS:
        raise ValueError(f"unknown collective {collective!r}; choose one of {list(BUSBW_FACTORS)}")
    return BUSBW_FACTORS[collective](p)


# ---------------------------------------------------------------------------
# Fitting alpha and beta to measured times: t(S, p) = a(S, p)·alpha + b(S, p)·beta,
# a and b read off a closed form above (gamma folded into beta). Least squares on
# relative errors, so that microsecond points count as much as second-long ones.
# ---------------------------------------------------------------------------


def simple_model(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """One message of n bytes: α + nβ (fits any collective; 1/β is then the large-size algbw)."""
    return alpha + n * beta


#: (collective, algorithm) -> closed form f(n, p, alpha, beta).
FIT_MODELS: dict[tuple[str, str], ClosedForm] = {
    ("all_reduce", "ring"): ring_allreduce,
    ("all_reduce", "recursive_doubling"): recursive_doubling_allreduce,
    ("all_reduce", "rabenseifner"): rabenseifner_allreduce,
    ("all_gather", "ring"): ring_allgather,
    ("all_gather", "recursive_doubling"): recursive_doubling_allgather,
    ("reduce_scatter", "ring"): ring_reduce_scatter,
    ("reduce_scatter", "recursive_halving"): recursive_halving_reduce_scatter,
    ("broadcast", "binomial_tree"): binomial_broadcast,
    ("reduce", "binomial_tree"): binomial_reduce,
}
DEFAULT_ALGORITHM = {
    "all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring",
    "broadcast": "binomial_tree", "reduce": "binomial_tree",
}  # fmt: skip
#: The column a torch user gets: all_reduce/broadcast/reduce are in place in torch
#: (their "out-of-place" column is a copy plus the in-place call).
NATIVE_IN_PLACE = {"all_reduce": True, "broadcast": True, "reduce": True}


def fit_model(collective: str, algorithm: str) -> ClosedForm:
    """The closed form t = f(S, p, α, β) for ``collective`` run by ``algorithm``."""
    if algorithm == "simple":
        return simple_model
    if (collective, algorithm) not in FIT_MODELS:
        known = [a for c, a in FIT_MODELS if c == collective] + ["simple"]
        raise ValueError(
            f"no α-β model for {collective} with algorithm {algorithm!r}; "
            f"choose one of: {', '.join(known)}"
        )
    return FIT_MODELS[(collective, algorithm)]


@dataclass(frozen=True)
class AlphaBetaFit:
    """α (s), β (s/byte), 1/β as GB/s, and how well t = a·α + b·β fits (RMS relative residual)."""

    collective: str
    algorithm: str
    alpha: float
    beta: float
    residual: float
    points: int

    @property
    def bandwidth(self) -> float:
        """1/β in GB/s (GB = 1e9 bytes); infinite if β is 0."""
        return float("inf") if self.beta == 0 else 1 / self.beta / 1e9

    def coefficients(self, size: float, p: int) -> tuple[float, float]:
        """(a, b): the model's multipliers of α and β at this size and world size."""
        f = fit_model(self.collective, self.algorithm)
        return f(size, p, 1.0, 0.0), f(size, p, 0.0, 1.0)

    def time(self, size: float, p: int) -> float:
        """Predicted time in seconds."""
        a, b = self.coefficients(size, p)
        return a * self.alpha + b * self.beta

    def busbw(self, size: float, p: int) -> float:
        """Predicted busbw in GB/s."""
        return size / self.time(size, p) / 1e9 * busbw_factor(self.collective, p)

    def crossover(self, p: int) -> float:
        """The size (bytes) where the latency term equals the bandwidth term."""
        a, b = self.coefficients(1.0, p)  # b is proportional to the size: b(S) = S·b(1)
        return float("inf") if self.beta == 0 else a * self.alpha / (b * self.beta)

    def __str__(self) -> str:
        return (
            f"{self.collective} ({self.algorithm}): α = {self.alpha * 1e6:.3g} µs, "
            f"β = {self.beta * 1e9:.3g} ns/B (1/β = {self.bandwidth:.3g} GB/s), "
            f"RMS residual {self.residual:.1%} over {self.points} points"
        )


def as_records(results: object) -> list[dict]:
    """Plain dicts from benchmark results: dicts, objects with ``to_dict()``, an object with
    ``.results`` (a bench Sweep), or a pandas DataFrame."""
    if hasattr(results, "columns") and hasattr(results, "to_dict"):  # a DataFrame
        return results.to_dict("records")  # type: ignore[no-any-return]
    if hasattr(results, "results"):
        results = results.results
    return [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]  # type: ignore[union-attr]


def select_rows(
    records: list[dict], collective: str | None, in_place: bool | None
) -> tuple[str, list[dict]]:
    """The timed rows of one collective, in-place or not (default: its native form)."""
    collectives = {r["collective"] for r in records}
    if collective is None:
        if len(collectives) != 1:
            raise ValueError(f"these results hold {sorted(collectives)}: pass collective=")
        collective = collectives.pop()
    if in_place is None:
        in_place = NATIVE_IN_PLACE.get(collective, False)
    rows = [
        r for r in records
        if r["collective"] == collective and bool(r["in_place"]) == in_place
        and r.get("time_us") is not None
    ]  # fmt: skip
    return collective, rows


def fit_alpha_beta(
    results: object,
    collective: str | None = None,
    algorithm: str | None = None,
    in_place: bool | None = None,
    time: str = "time_us",
) -> AlphaBetaFit:
    """Least-squares α and β from benchmark results (records, Results, a Sweep or a DataFrame).

    ``algorithm`` defaults to ring (binomial tree for broadcast/reduce, simple
    otherwise). ``in_place`` picks the column: by default the one torch users
    call (in-place for all_reduce/broadcast/reduce, out-of-place for the rest).
    ``time`` is the field fitted: "time_us" (nccl-tests' mean) or "median_us".
    """
    collective, rows = select_rows(as_records(results), collective, in_place)
    if collective not in BUSBW_FACTORS:
        raise ValueError(f"unknown collective {collective!r}")
    algorithm = algorithm or DEFAULT_ALGORITHM.get(collective, "simple")
    f = fit_model(collective, algorithm)
    if len({r["size"] for r in rows}) < 2:
        raise ValueError("need results at two sizes or more to separate α from β")
    t = np.array([r[time] * 1e-6 for r in rows])
    a = np.array([f(r["size"], r["nranks"], 1.0, 0.0) for r in rows])
    b = np.array([f(r["size"], r["nranks"], 0.0, 1.0) for r in rows])
    design = np.stack([a / t, b / t], axis=1)  # relative error: divide each row by t
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # physically meaningless: refit with one term only
        alpha, beta = 0.0, float(np.dot(b / t, np.ones_like(t)) / np.dot(b / t, b / t))
    elif beta < 0:
        alpha, beta = float(np.dot(a / t, np.ones_like(t)) / np.dot(a / t, a / t)), 0.0
    residual = float(np.sqrt(np.mean((design @ np.array([alpha, beta]) - 1.0) ** 2)))
    return AlphaBetaFit(collective, algorithm, float(alpha), float(beta), residual, len(rows))


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
