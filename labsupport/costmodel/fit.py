"""From measurements to the model: nccl-tests' busbw factors, and α, β fitted to benchmark rows.

Here (the core) rather than in the runtime's ``bench`` so that bench and ``viz`` both import
it from below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from labsupport.costmodel.formulas import (
    ClosedForm,
    binomial_broadcast_time,
    binomial_reduce_time,
    rabenseifner_all_reduce_time,
    recursive_doubling_all_gather_time,
    recursive_doubling_all_reduce_time,
    recursive_halving_reduce_scatter_time,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
)
from labsupport.units import format_time

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
    ("all_reduce", "ring"): ring_all_reduce_time,
    ("all_reduce", "recursive_doubling"): recursive_doubling_all_reduce_time,
    ("all_reduce", "rabenseifner"): rabenseifner_all_reduce_time,
    ("all_gather", "ring"): ring_all_gather_time,
    ("all_gather", "recursive_doubling"): recursive_doubling_all_gather_time,
    ("reduce_scatter", "ring"): ring_reduce_scatter_time,
    ("reduce_scatter", "recursive_halving"): recursive_halving_reduce_scatter_time,
    ("broadcast", "binomial_tree"): binomial_broadcast_time,
    ("reduce", "binomial_tree"): binomial_reduce_time,
}
DEFAULT_ALGORITHM = {
    "all_reduce": "ring",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "broadcast": "binomial_tree",
    "reduce": "binomial_tree",
}
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
            f"{self.collective} ({self.algorithm}): α = {format_time(self.alpha)}, "
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
        r
        for r in records
        if r["collective"] == collective
        and bool(r["in_place"]) == in_place
        and r.get("time_us") is not None
    ]
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
