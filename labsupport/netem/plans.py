"""Which schedule each collective runs with each algorithm (no torch needed: the model uses it too).

Start at :data:`PLANS`, the table (by builder name, from :data:`labsupport.schedules.BUILDERS`);
:func:`schedule_for` reads it.
"""

from __future__ import annotations

from functools import lru_cache

from labsupport.schedules import BUILDERS, Schedule, hierarchical_all_reduce

#: The collectives that run a schedule (all_to_all, gather and scatter run direct messages).
SCHEDULED = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")

#: algorithm -> the builders it runs for (all_reduce, reduce_scatter, all_gather), by their
#: names in :data:`labsupport.schedules.BUILDERS`. broadcast and reduce always use a
#: binomial tree (``binomial_broadcast``, ``binomial_reduce``).
PLANS: dict[str, tuple[str, str, str]] = {
    # The ring all-reduce is a ring reduce-scatter, then a ring all-gather.
    "ring": ("ring_all_reduce", "ring_reduce_scatter", "ring_all_gather"),
    # Direct reduce-scatter + direct all-gather: HCCL's Mesh.
    "direct": ("direct_all_reduce", "direct_reduce_scatter", "direct_all_gather"),
    # Binomial reduce + binomial broadcast.
    "tree": ("tree_all_reduce", "ring_reduce_scatter", "ring_all_gather"),
    # NCCL's double binary tree.
    "double_binary_tree": (
        "double_binary_tree_all_reduce",
        "ring_reduce_scatter",
        "ring_all_gather",
    ),
    # For world sizes that are not a power of two, recursive doubling and Rabenseifner fold
    # the extra ranks in first (two more whole-buffer steps), as MPICH and HCCL do. Their
    # reduce-scatter and all-gather (halving / doubling) need 2^k ranks: else the ring's.
    "recursive_doubling": (
        "recursive_doubling_all_reduce",
        "recursive_halving_reduce_scatter",
        "recursive_doubling_all_gather",
    ),
    # Halving (nearest partner first), then doubling all-gather.
    "rabenseifner": (
        "rabenseifner_all_reduce",
        "recursive_halving_reduce_scatter",
        "recursive_doubling_all_gather",
    ),
    # Two levels: direct RS in the node, ring AR across, direct AG in the node. Direct
    # (mesh) phases inside a node because a netem node is a full mesh (every ordered pair of
    # ranks has its own link, as HCCS in an A2 server), which is what HCCL does there. Not
    # in BUILDERS (it needs the node size): see _HIERARCHICAL.
    "hierarchical": ("hierarchical_all_reduce", "ring_reduce_scatter", "ring_all_gather"),
    # The same with rings inside the nodes.
    "hierarchical_ring": ("hierarchical_all_reduce", "ring_reduce_scatter", "ring_all_gather"),
    # Mesh inside, halving-doubling across the nodes: HCCL's H-D_R at level 1.
    "hierarchical_hd": ("hierarchical_all_reduce", "ring_reduce_scatter", "ring_all_gather"),
}
#: The two-level algorithms: what runs inside and across the nodes
#: (``hierarchical_all_reduce``'s ``intra`` and ``inter``).
_HIERARCHICAL = {
    "hierarchical": ("direct", "ring"),
    "hierarchical_ring": ("ring", "ring"),
    "hierarchical_hd": ("direct", "halving_doubling"),
}


def _is_pow2(p: int) -> bool:
    return p & (p - 1) == 0


@lru_cache(maxsize=256)
def schedule_for(
    collective: str, algorithm: str, p: int, node_size: int | None = None, root: int = 0
) -> Schedule:
    """The schedule ``collective`` runs with ``algorithm`` on p ranks (see :data:`PLANS`).

    Cached: a collective called in a loop does not rebuild its schedule.
    """
    if collective in ("broadcast", "reduce"):
        return BUILDERS[f"binomial_{collective}"](p, root)  # type: ignore[call-arg]
    if collective not in ("all_reduce", "reduce_scatter", "all_gather"):
        raise ValueError(f"no schedule for {collective!r}; choose one of: {', '.join(SCHEDULED)}")
    plan = PLANS.get(algorithm, PLANS["ring"])  # an unknown algorithm runs the ring
    if collective == "all_reduce" and algorithm in _HIERARCHICAL:
        intra, inter = _HIERARCHICAL[algorithm]
        return hierarchical_all_reduce(p, node_size or p, intra, inter)
    name = plan[("all_reduce", "reduce_scatter", "all_gather").index(collective)]
    if name.startswith("recursive_") and collective != "all_reduce" and not _is_pow2(p):
        name = f"ring_{collective}"  # halving / doubling need 2^k ranks
    return BUILDERS[name](p)
