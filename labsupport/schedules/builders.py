"""Ring, direct (mesh) and binomial-tree algorithms: each builder returns the Schedule for p ranks.

The halving-doubling family is in :mod:`~labsupport.schedules.halving`, the
two-level algorithm in :mod:`~labsupport.schedules.twolevel`, NCCL's double
binary tree in :mod:`~labsupport.schedules.trees`; :data:`BUILDERS` (in
:mod:`~labsupport.schedules.registry`) lists them all by name.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.model import Rotation, Schedule, ScheduleError, Step


def _pow2(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


def require_pow2(p: int, name: str) -> None:
    """Raise a ScheduleError naming ``name`` unless ``p`` is a power of two."""
    if not _pow2(p):
        raise ScheduleError(
            f"{name} needs a power-of-two world size, got {p}. Use a ring schedule, or "
            "recursive_doubling_all_reduce / rabenseifner_all_reduce, which fold the extra ranks."
        )


def check_world_size(p: int, root: int = 0) -> None:
    """Raise a ScheduleError unless ``p >= 1`` and ``root`` is one of its ranks."""
    if p < 1:
        raise ScheduleError(f"world size must be at least 1, got {p}")
    if not 0 <= root < p:
        raise ScheduleError(f"root {root} is not a rank of a group of {p}")


def ring_phase(src, dst, rotation: Rotation, reduce: bool, steps: int) -> list[Step]:  # noqa: ANN001
    """``steps`` steps over fixed (src, dst) pairs whose chunks move back one place per step."""
    flags = np.full(len(src), reduce)
    return [Step.rotating(src, dst, flags, rotation, -s) for s in range(steps)]


def ring_reduce_scatter(p: int) -> Schedule:
    """Ring reduce-scatter: p-1 steps; at step s rank r adds chunk (r-s-1) % p into rank r+1.

    Chunk c starts its trip at rank c+1 and arrives, complete, at rank c after
    p-1 hops, so rank r ends with the full sum of chunk r.
    """
    check_world_size(p)
    r = np.arange(p)
    steps = ring_phase(r, (r + 1) % p, Rotation(base=(r - 1) % p, modulus=p), True, p - 1)
    return Schedule("ring_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def ring_all_gather(p: int) -> Schedule:
    """Ring all-gather: p-1 steps; at step s rank r copies chunk (r-s) % p to rank r+1."""
    check_world_size(p)
    r = np.arange(p)
    steps = ring_phase(r, (r + 1) % p, Rotation(base=r, modulus=p), False, p - 1)
    return Schedule("ring_all_gather", "all_gather", p, p, tuple(steps))


def ring_all_reduce(p: int) -> Schedule:
    """Ring all-reduce: ring reduce-scatter, then ring all-gather (2(p-1) steps, p chunks)."""
    return ring_reduce_scatter(p).then(ring_all_gather(p), "ring_all_reduce", "all_reduce")


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
