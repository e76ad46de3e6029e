"""Which schedule each collective runs with each algorithm (no torch needed: the model uses it too).

================== ===================================== =============================
algorithm          all_reduce                            reduce_scatter / all_gather
================== ===================================== =============================
ring               ring (reduce-scatter + all-gather)    ring
direct             direct RS + direct AG (HCCL's Mesh)   direct
tree               binomial reduce + binomial broadcast  ring
double_binary_tree NCCL's double binary tree             ring
recursive_doubling recursive doubling                    halving / doubling (2^k ranks)
rabenseifner       halving (nearest partner first) + AG  halving / doubling (2^k ranks)
hierarchical       direct RS in node, ring AR across,    ring
                   direct AG in node
hierarchical_ring  the same with rings inside the nodes  ring
================== ===================================== =============================

``hierarchical`` runs direct (mesh) phases inside a node because a netem node is
a full mesh (every ordered pair of ranks has its own link, as HCCS in an A2
server), which is what HCCL does there. broadcast and reduce always use a
binomial tree. For world sizes that are not a power of two, recursive doubling
and Rabenseifner fold the extra ranks in first (two more whole-buffer steps), as
MPICH and HCCL do.
"""

from __future__ import annotations

from functools import lru_cache

from labsupport.schedules import (
    Schedule,
    binomial_broadcast,
    binomial_reduce,
    direct_all_gather,
    direct_all_reduce,
    direct_reduce_scatter,
    double_binary_tree_all_reduce,
    hierarchical_all_reduce,
    rabenseifner_all_reduce,
    recursive_doubling_all_gather,
    recursive_doubling_all_reduce,
    recursive_halving_reduce_scatter,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    tree_all_reduce,
)

#: The collectives that run a schedule (all_to_all, gather and scatter run direct messages).
SCHEDULED = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")

_ALL_REDUCE = {
    "ring": lambda p, k: ring_all_reduce(p),
    "direct": lambda p, k: direct_all_reduce(p),
    "tree": lambda p, k: tree_all_reduce(p),
    "double_binary_tree": lambda p, k: double_binary_tree_all_reduce(p),
    "recursive_doubling": lambda p, k: recursive_doubling_all_reduce(p),
    "rabenseifner": lambda p, k: rabenseifner_all_reduce(p),
    "hierarchical": lambda p, k: hierarchical_all_reduce(p, k, intra="direct"),
    "hierarchical_ring": lambda p, k: hierarchical_all_reduce(p, k, intra="ring"),
}


def _is_pow2(p: int) -> bool:
    return p & (p - 1) == 0


@lru_cache(maxsize=256)
def schedule_for(
    collective: str, algorithm: str, p: int, node_size: int | None = None, root: int = 0
) -> Schedule:
    """The schedule ``collective`` runs with ``algorithm`` on p ranks (see the table above).

    Cached: a collective called in a loop does not rebuild its schedule.
    """
    if collective == "all_reduce":
        return _ALL_REDUCE.get(algorithm, _ALL_REDUCE["ring"])(p, node_size or p)
    halving = algorithm in ("recursive_doubling", "rabenseifner") and _is_pow2(p)
    direct = algorithm == "direct"
    if collective == "reduce_scatter":
        if direct:
            return direct_reduce_scatter(p)
        return recursive_halving_reduce_scatter(p) if halving else ring_reduce_scatter(p)
    if collective == "all_gather":
        if direct:
            return direct_all_gather(p)
        return recursive_doubling_all_gather(p) if halving else ring_all_gather(p)
    if collective == "broadcast":
        return binomial_broadcast(p, root)
    if collective == "reduce":
        return binomial_reduce(p, root)
    raise ValueError(f"no schedule for {collective!r}; choose one of: {', '.join(SCHEDULED)}")
