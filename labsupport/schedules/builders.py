"""Ring, direct (mesh) and binomial-tree algorithms: each builder returns the Schedule for p ranks.

The ring is written twice: in plain code, the rule of notebook 03 one transfer
at a time, in :mod:`~labsupport.schedules.ring` (read that one), and in a
compact form, one :class:`~labsupport.schedules.model.Rotation` per phase, in
:mod:`~labsupport.schedules.compact`. The ring builders imported from here are
the compact ones (the comment below the imports says why).

The halving-doubling family is in :mod:`~labsupport.schedules.halving`, the
two-level algorithm in :mod:`~labsupport.schedules.twolevel`, NCCL's double
binary tree in :mod:`~labsupport.schedules.trees`; :data:`BUILDERS` (in
:mod:`~labsupport.schedules.registry`) lists them all by name.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.compact import (
    ring_all_gather,
    ring_all_reduce,
    ring_phase,
    ring_reduce_scatter,
)
from labsupport.schedules.model import Schedule, ScheduleError, Step, check_world_size

# The public ring (labsupport.schedules.ring_all_reduce, BUILDERS) is the compact one,
# for every p. Measured on 2 CPU cores (best of 3), ring_all_reduce(p):
#   p        4        64       256      1024    4096
#   plain    0.18 ms  9.3 ms   111 ms   1.8 s   37.5 s (once), 1.25 GiB
#   compact  0.09 ms  0.18 ms  0.52 ms  2.0 ms  8.0 ms
# The plain code is far over the 50 ms budget at 4096 ranks. A switch (plain
# below some p, compact above) was not taken: it would gain no time (both take
# milliseconds or less below p = 64), and it would make a ring's steps rotating
# or not depending on p, while tests/core/test_schedules_rotation.py expects rotating
# steps from ring_all_reduce(7). Instead tests/core/test_schedules_ring_plain.py
# checks, transfer by transfer, that the plain ring a learner reads is the ring
# the package builds.

# The ring builders and ring_phase are re-exported: callers of builders.ring_all_reduce
# and the like keep working since the ring moved to compact.py.
__all__ = [
    "binomial_broadcast",
    "binomial_reduce",
    "check_world_size",
    "direct_all_gather",
    "direct_all_reduce",
    "direct_reduce_scatter",
    "naive_all_reduce",
    "require_pow2",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_phase",
    "ring_reduce_scatter",
    "tree_all_reduce",
]


def _pow2(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


def require_pow2(p: int, name: str) -> None:
    """Raise a ScheduleError naming ``name`` unless ``p`` is a power of two."""
    if not _pow2(p):
        raise ScheduleError(
            f"{name} needs a power-of-two world size, got {p}. Use a ring schedule, or "
            "recursive_doubling_all_reduce / rabenseifner_all_reduce, which fold the extra ranks."
        )


def direct_reduce_scatter(p: int) -> Schedule:
    """Direct (mesh) reduce-scatter: one step; every rank adds chunk j straight into rank j.

    ASTRA-sim's ``direct``, HCCL's Mesh: on a full mesh (HCCS inside an A2
    server, NVSwitch) a rank drives its p-1 links at once, so the step costs one
    α and n/p bytes per link; on one port it costs as much as a ring. The
    transfers are listed in rounds: in round j every rank r sends to r + j, so
    one port takes its p-1 messages one round at a time, one in and one out.
    """
    check_world_size(p)
    r, j = np.tile(np.arange(p), p - 1), np.repeat(np.arange(1, p), p)
    dst = (r + j) % p
    steps = (Step.columns(r, dst, dst, dst + 1, True),) if p > 1 else ()
    return Schedule("direct_reduce_scatter", "reduce_scatter", p, p, steps)


def direct_all_gather(p: int) -> Schedule:
    """Direct (mesh) all-gather: one step; every rank copies its chunk to every other rank."""
    check_world_size(p)
    r, j = np.tile(np.arange(p), p - 1), np.repeat(np.arange(1, p), p)
    steps = (Step.columns(r, (r + j) % p, r, r + 1, False),) if p > 1 else ()
    return Schedule("direct_all_gather", "all_gather", p, p, steps)


def direct_all_reduce(p: int) -> Schedule:
    """Direct (mesh) all-reduce: direct reduce-scatter, then direct all-gather (2 steps, p chunks).

    HCCL's Mesh all-reduce inside an 8-NPU server: 2α + 2n/p·β on a full mesh.
    """
    return direct_reduce_scatter(p).then(direct_all_gather(p), "direct_all_reduce", "all_reduce")


def naive_all_reduce(p: int, root: int = 0) -> Schedule:
    """Everyone sends the whole buffer to ``root``, which sums, then sends the sum back.

    Two steps, but the root receives p-1 buffers in the first and sends p-1 in
    the second: its link carries 2(p-1)·n bytes.
    """
    check_world_size(p, root)
    others = np.array([r for r in range(p) if r != root], dtype=np.int64)
    steps = (
        Step.columns(src=others, dst=root, start=0, stop=1, reduce=True),
        Step.columns(src=root, dst=others, start=0, stop=1, reduce=False),
    )
    return Schedule("naive_all_reduce", "all_reduce", p, 1, steps if p > 1 else (), root)


def binomial_broadcast(p: int, root: int = 0) -> Schedule:
    """Binomial-tree broadcast: at step k every rank that has the data sends it 2**k ranks on.

    Works for every p: ceil(log2 p) steps; a rank skips a send whose target would
    be past the end of the group. Ranks are counted relative to the root.
    """
    check_world_size(p, root)
    steps, mask = [], 1
    while mask < p:
        v = np.arange(min(mask, p - mask))  # relative ranks that have the data and a target
        steps.append(Step.columns((v + root) % p, (v + mask + root) % p, 0, 1, False))
        mask *= 2
    return Schedule("binomial_broadcast", "broadcast", p, 1, tuple(steps), root)


def binomial_reduce(p: int, root: int = 0) -> Schedule:
    """Binomial-tree reduce: the broadcast tree run backwards, adding on the way to ``root``.

    At step k the relative ranks that are odd multiples of 2**k add their partial
    sum into the rank 2**k below them. Works for every p (ceil(log2 p) steps).
    """
    check_world_size(p, root)
    steps, mask = [], 1
    while mask < p:
        v = np.arange(mask, p, 2 * mask)
        steps.append(Step.columns((v + root) % p, (v - mask + root) % p, 0, 1, True))
        mask *= 2
    return Schedule("binomial_reduce", "reduce", p, 1, tuple(steps), root)


def tree_all_reduce(p: int) -> Schedule:
    """Binomial-tree all-reduce: a binomial reduce to rank 0, then a binomial broadcast.

    The textbook tree: the whole buffer on every one of its 2 lg p steps. NCCL's
    tree is another algorithm (:func:`~labsupport.schedules.trees.double_binary_tree_all_reduce`).
    """
    return binomial_reduce(p).then(binomial_broadcast(p), "tree_all_reduce", "all_reduce")
