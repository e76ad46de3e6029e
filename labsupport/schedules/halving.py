"""Recursive halving and doubling: lg p steps between partners r XOR 2**k, and the fold for other p.

**Partner order.** Recursive halving can start with the nearest partner
(distance 1, sending half the buffer) or the farthest (distance p/2). On a
two-level network the distant partners sit on other nodes, so starting near
keeps the big halves on the fast links and sends only small pieces across.
MPICH's all-reduce starts near (``mask = 0x1`` in
``allreduce_intra_reduce_scatter_allgather``), as does ASTRA-sim's
``HalvingDoubling.cc`` (distance 1 with n/2) and HCCL's RHD all-reduce ("vector
halving, distance doubling", recommended on hierarchical networks). Starting
near, rank r ends the halving with block bit-reversed(r), which an all-reduce
does not mind (its doubling phase retraces the halving backwards). A
reduce-scatter must leave block r on rank r, so
:func:`recursive_halving_reduce_scatter` starts far, as MPICH's reduce-scatter
does (``mask = pof2 >> 1``) and HCCL's ("distance halving, to ensure the order").

**Other world sizes.** :func:`recursive_doubling_all_reduce` and
:func:`rabenseifner_all_reduce` fold the ``p - q`` extra ranks in first
(q the largest power of two below p), as MPICH and HCCL do: two more steps
that move the whole buffer.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.builders import check_world_size, require_pow2
from labsupport.schedules.model import Schedule, Step

#: The two orders in which recursive halving can meet its partners.
ORDERS = ("nearest_first", "farthest_first")


def _masks(q: int, order: str) -> list[int]:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    near = [1 << i for i in range(q.bit_length() - 1)]
    return near if order == "nearest_first" else near[::-1]


def _halving(q: int, masks: list[int]) -> tuple[list[Step], list[tuple]]:
    """Recursive halving on q ranks (a power of two), meeting partners r ^ m for m in ``masks``.

    Returns the steps and, for each, (mask, lo, hi): the chunks each rank kept.
    In each step a rank keeps the upper half of its range if its bit m is set.
    """
    r = np.arange(q)
    lo, hi = np.zeros(q, dtype=np.int64), np.full(q, q, dtype=np.int64)
    steps, kept = [], []
    for m in masks:
        mid = (lo + hi) // 2
        upper = (r & m) != 0  # this rank keeps the upper half and sends the lower one
        send_lo, send_hi = np.where(upper, lo, mid), np.where(upper, mid, hi)
        steps.append(Step.columns(r, r ^ m, send_lo, send_hi, True))
        lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
        kept.append((m, lo, hi))
    return steps, kept


def recursive_halving_reduce_scatter(p: int) -> Schedule:
    """Recursive halving reduce-scatter: lg p steps; partners swap and add half of what they hold.

    Starts with the farthest partner (p/2 away), so that the range a rank keeps
    always contains its own chunk and rank r ends with chunk r (MPICH's order).
    Power-of-two p only.
    """
    check_world_size(p)
    require_pow2(p, "recursive_halving_reduce_scatter")
    steps, _ = _halving(p, _masks(p, "farthest_first"))
    return Schedule("recursive_halving_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def recursive_doubling_all_gather(p: int) -> Schedule:
    """Recursive doubling all-gather: lg p steps; partners 2**k apart swap all they hold.

    Starts with the nearest partner: what each rank holds doubles every step,
    an aligned block of 2**k chunks that contains its own. Power-of-two p only.
    """
    check_world_size(p)
    require_pow2(p, "recursive_doubling_all_gather")
    r = np.arange(p)
    masks = _masks(p, "nearest_first")
    steps = [Step.columns(r, r ^ m, r - r % m, r - r % m + m, False) for m in masks]
    return Schedule("recursive_doubling_all_gather", "all_gather", p, p, tuple(steps))


def _fold(p: int, inner: Schedule, name: str) -> Schedule:
    """Run a power-of-two all-reduce on p ranks that are not a power of two (as MPICH does).

    With q the largest power of two below p and e = p - q extra ranks: first the
    even ranks 0, 2, .., 2e-2 add their whole buffer into their odd neighbour,
    then the q remaining ranks run ``inner``, then the odd ranks copy the result
    back. That costs two extra steps that move the whole buffer:
    α + nβ + nγ before, α + nβ after (HCCL's RHD documentation counts the same).
    """
    q = inner.world_size
    e = p - q
    everything = (0, inner.num_chunks)
    even, odd = np.arange(0, 2 * e, 2), np.arange(1, 2 * e, 2)
    active = np.concatenate([odd, np.arange(2 * e, p)])  # active[i] is the real rank of i
    pre = Step.columns(even, odd, *everything, True)
    post = Step.columns(odd, even, *everything, False)
    steps = (pre, *(st.mapped(active) for st in inner.steps), post)
    note = f"{e} extra rank(s) folded into a group of {q} (two extra whole-buffer steps)"
    return Schedule(name, "all_reduce", p, inner.num_chunks, steps, note=note)


def largest_pow2_at_most(p: int) -> int:
    """The largest power of two q <= p: the group the extra ranks fold into."""
    return 1 << (p.bit_length() - 1)


def recursive_doubling_all_reduce(p: int) -> Schedule:
    """Recursive doubling all-reduce: lg p steps; partners 2**k apart swap and add everything.

    For p not a power of two, the extra ranks are folded in first (see ``_fold``).
    """
    check_world_size(p)
    name = "recursive_doubling_all_reduce"
    q = largest_pow2_at_most(p)
    r = np.arange(q)
    steps = [Step.columns(r, r ^ m, 0, 1, True) for m in _masks(q, "nearest_first")]
    inner = Schedule(name, "all_reduce", q, 1, tuple(steps))
    return inner if q == p else _fold(p, inner, name)


def rabenseifner_all_reduce(p: int, order: str = "nearest_first") -> Schedule:
    """Rabenseifner all-reduce: recursive halving reduce-scatter, then doubling all-gather.

    ``order="nearest_first"`` (the default, MPICH's and ASTRA-sim's) halves
    with the partner 1 away first, n/2 bytes, and the one p/2 away last, n/p
    bytes; the all-gather then retraces the same partners backwards.
    ``"farthest_first"`` starts p/2 away (the big half crosses the farthest
    link). Both cost 2 lg p·α + 2n(p-1)/p·β on one α and β; on a two-level
    network they differ. For p not a power of two, the extra ranks are folded
    in first (see ``_fold``); the buffer is then cut into q chunks, q the
    largest power of two below p.
    """
    check_world_size(p)
    name = "rabenseifner_all_reduce"
    q = largest_pow2_at_most(p)
    halving, kept = _halving(q, _masks(q, order))
    r = np.arange(q)
    doubling = [Step.columns(r, r ^ m, lo, hi, False) for m, lo, hi in reversed(kept)]
    note = f"halving {order.replace('_', ' ')}"
    inner = Schedule(name, "all_reduce", q, q, (*halving, *doubling), note=note)
    return inner if q == p else _fold(p, inner, name)
