"""Which schedule each collective runs with each algorithm (no torch needed: the model uses it too).

============== ============================== ============================
algorithm      all_reduce                     reduce_scatter / all_gather
============== ============================== ============================
ring           ring (reduce-scatter + gather) ring
tree           binomial reduce + broadcast    ring
recursive_dou. recursive doubling             halving / doubling (2^k ranks)
rabenseifner   halving RS + doubling AG       halving / doubling (2^k ranks)
hierarchical   RS in node, AR across, AG      ring
============== ============================== ============================

broadcast and reduce always use a binomial tree. For world sizes that are not
a power of two, recursive doubling and Rabenseifner fold the extra ranks in
first (two more whole-buffer steps), as MPICH does.
"""

from __future__ import annotations

from functools import lru_cache

from labsupport.schedules import (
    Schedule,
    binomial_broadcast,
    binomial_reduce,
    rabenseifner_all_reduce,
    recursive_doubling_all_gather,
    recursive_doubling_all_reduce,
    recursive_halving_reduce_scatter,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from labsupport.schedules.hierarchical import hierarchical_all_reduce

#: The collectives that run a schedule (all_to_all, gather and scatter run direct messages).
SCHEDULED = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


def _is_pow2(p: int) -> bool:
    return p & (p - 1) == 0


def tree_all_reduce(p: int) -> Schedule:
    """Binomial-tree all-reduce: a binomial reduce to rank 0, then a binomial broadcast."""
    return binomial_reduce(p).then(binomial_broadcast(p), "tree_all_reduce", "all_reduce")


@lru_cache(maxsize=256)
def schedule_for(
    collective: str, algorithm: str, p: int, node_size: int | None = None, root: int = 0
) -> Schedule:
    """The schedule ``collective`` runs with ``algorithm`` on p ranks (see the table above).

    Cached: a collective called in a loop does not rebuild its schedule.
    """
    if collective == "all_reduce":
        if algorithm == "tree":
            return tree_all_reduce(p)
        if algorithm == "recursive_doubling":
            return recursive_doubling_all_reduce(p)
        if algorithm == "rabenseifner":
            return rabenseifner_all_reduce(p)
        if algorithm == "hierarchical":
            return hierarchical_all_reduce(p, node_size or p)
        return ring_all_reduce(p)
    halving = algorithm in ("recursive_doubling", "rabenseifner") and _is_pow2(p)
    if collective == "reduce_scatter":
        return recursive_halving_reduce_scatter(p) if halving else ring_reduce_scatter(p)
    if collective == "all_gather":
        return recursive_doubling_all_gather(p) if halving else ring_all_gather(p)
    if collective == "broadcast":
        return binomial_broadcast(p, root)
    if collective == "reduce":
        return binomial_reduce(p, root)
    raise ValueError(f"no schedule for {collective!r}; choose one of: {', '.join(SCHEDULED)}")
