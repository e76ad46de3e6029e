"""Fit the α-β model to measured times: latency α, time per byte β, bandwidth 1/β.

A collective run by a given algorithm costs (FACTS.md, Thakur et al. 2005)

    t(S, p) = a(p)·α + b(S, p)·β

e.g. ring all_reduce: a = 2(p-1), b = 2S(p-1)/p. Both coefficients come from
the closed forms in :mod:`labsupport.costmodel` (γ, the reduction cost, is
folded into β). The fit is linear least squares on *relative* errors, so that
the microsecond points count as much as the second-long ones; results for
several world sizes can be fitted together (same α and β, different p).

The ``"simple"`` algorithm, t = α + S·β, fits any collective: its 1/β is then
the algbw that very large messages approach.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labsupport import costmodel
from labsupport.bench.collectives import COLLECTIVES, busbw_factor
from labsupport.bench.report import as_records


def _simple(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return alpha + n * beta


#: (collective, algorithm) -> closed form f(n, p, alpha, beta).
MODELS: dict[tuple[str, str], Callable[..., float]] = {
    ("all_reduce", "ring"): costmodel.ring_allreduce,
    ("all_reduce", "recursive_doubling"): costmodel.recursive_doubling_allreduce,
    ("all_reduce", "rabenseifner"): costmodel.rabenseifner_allreduce,
    ("all_gather", "ring"): costmodel.ring_allgather,
    ("all_gather", "recursive_doubling"): costmodel.recursive_doubling_allgather,
    ("reduce_scatter", "ring"): costmodel.ring_reduce_scatter,
    ("reduce_scatter", "recursive_halving"): costmodel.recursive_halving_reduce_scatter,
    ("broadcast", "binomial_tree"): costmodel.binomial_broadcast,
    ("reduce", "binomial_tree"): costmodel.binomial_reduce,
}
DEFAULT_ALGORITHM = {
    "all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring",
    "broadcast": "binomial_tree", "reduce": "binomial_tree",
}  # fmt: skip
#: The column a torch user gets: all_reduce/broadcast/reduce are in place in torch.
NATIVE_IN_PLACE = {"all_reduce": True, "broadcast": True, "reduce": True}


def model(collective: str, algorithm: str) -> Callable[..., float]:
    """The closed form t = f(S, p, α, β) for ``collective`` run by ``algorithm``."""
    if algorithm == "simple":
        return _simple
    if (collective, algorithm) not in MODELS:
        known = [a for c, a in MODELS if c == collective] + ["simple"]
        raise ValueError(
            f"no α-β model for {collective} with algorithm {algorithm!r}; "
            f"choose one of: {', '.join(known)}"
        )
    return MODELS[(collective, algorithm)]


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
        return math.inf if self.beta == 0 else 1 / self.beta / 1e9

    def coefficients(self, size: float, nranks: int) -> tuple[float, float]:
        """(a, b): the model's multipliers of α and β at this size and world size."""
        f = model(self.collective, self.algorithm)
        return f(size, nranks, 1.0, 0.0), f(size, nranks, 0.0, 1.0)

    def time(self, size: float, nranks: int) -> float:
        """Predicted time in seconds."""
        a, b = self.coefficients(size, nranks)
        return a * self.alpha + b * self.beta

    def busbw(self, size: float, nranks: int) -> float:
        """Predicted busbw in GB/s."""
        return size / self.time(size, nranks) / 1e9 * busbw_factor(self.collective, nranks)

    def crossover(self, nranks: int) -> float:
        """The size (bytes) where the latency term equals the bandwidth term."""
        a, b = self.coefficients(1.0, nranks)  # b is proportional to the size: b(S) = S·b(1)
        return math.inf if self.beta == 0 else a * self.alpha / (b * self.beta)

    def __str__(self) -> str:
        return (
            f"{self.collective} ({self.algorithm}): α = {self.alpha * 1e6:.3g} µs, "
            f"β = {self.beta * 1e9:.3g} ns/B (1/β = {self.bandwidth:.3g} GB/s), "
            f"RMS residual {self.residual:.1%} over {self.points} points"
        )


def select_rows(
    records: list[dict[str, Any]], collective: str | None, in_place: bool | None
) -> tuple[str, list[dict[str, Any]]]:
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
    results: Any,
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
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    algorithm = algorithm or DEFAULT_ALGORITHM.get(collective, "simple")
    f = model(collective, algorithm)
    sizes = {r["size"] for r in rows}
    if len(sizes) < 2:
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
