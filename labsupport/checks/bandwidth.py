"""Grader for notebook 06's exercise: the busbw factor of each collective.

The exercise asks for ``busbw_factor(collective, n)``: the number that turns
algbw into busbw on n ranks, as nccl-tests defines it (FACTS.md). The grader
compares it with :func:`labsupport.bench.busbw_factor` on every collective and
several world sizes, and on a mistake adds a hint that points at the reasoning,
not at the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from labsupport.bench.collectives import COLLECTIVES, busbw_factor
from labsupport.check import CheckResult, check_function

WORLD_SIZES = (2, 3, 4, 8, 16)

HINTS = {
    "all_reduce": "count how many times each element crosses a link in a ring: a reduce-scatter "
    "phase and an all-gather phase, each n-1 steps, spread over n links.",
    "all_gather": "S is the whole gathered buffer; every rank already has 1/n of it and must "
    "receive the rest.",
    "reduce_scatter": "S is the whole input (n pieces); each rank ends with one piece and must "
    "receive a contribution to it from each of the n-1 others.",
    "all_to_all": "S is the whole buffer; the piece a rank keeps for itself never crosses a link.",
    "broadcast": "every byte of the buffer must reach each rank once, and a pipelined chain "
    "runs at link speed.",
    "reduce": "like broadcast, in the other direction.",
    "sendrecv": "one buffer, one link: nothing to correct.",
}


def _first_wrong(fn: Callable[[str, int], float]) -> str | None:
    """The first collective where ``fn`` disagrees with the reference (None if none)."""
    for name in COLLECTIVES:
        for n in WORLD_SIZES:
            try:
                got = float(fn(name, n))
            except Exception:
                return name
            if abs(got - busbw_factor(name, n)) > 1e-9:
                return name
    return None


def check_busbw_factors(fn: Callable[[str, int], float]) -> CheckResult:
    """Check ``fn(collective, n)`` against nccl-tests' factors for every collective."""
    cases = [(name, n) for name in COLLECTIVES for n in WORLD_SIZES]
    result = check_function(fn, busbw_factor, cases, name="busbw_factor", rtol=0, atol=1e-9)
    if not result and result.implemented:
        wrong = _first_wrong(fn)
        if wrong is not None:
            print(f"   Hint for {wrong}: {HINTS[wrong]}")
    return result
