"""The shipped algorithms: each builder returns the :class:`Schedule` for p ranks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from labsupport.schedules.model import Rotation, Schedule, ScheduleError, Step


def _pow2(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


def _require_pow2(p: int, name: str) -> None:
    if not _pow2(p):
        raise ScheduleError(
            f"{name} needs a power-of-two world size, got {p}. Use a ring schedule, or "
            "recursive_doubling_all_reduce / rabenseifner_all_reduce, which fold the extra ranks."
        )


def _check_p(p: int, root: int = 0) -> None:
    if p < 1:
        raise ScheduleError(f"world size must be at least 1, got {p}")
    if not 0 <= root < p:
        raise ScheduleError(f"root {root} is not a rank of a group of {p}")


def _ring_phase(src, dst, rotation: Rotation, reduce: bool, steps: int) -> list[Step]:  # noqa: ANN001
    """``steps`` steps over fixed (src, dst) pairs whose chunks move back one place per step."""
    flags = np.full(len(src), reduce)
    return [Step.rotating(src, dst, flags, rotation, -s) for s in range(steps)]


def ring_reduce_scatter(p: int) -> Schedule:
    """Ring reduce-scatter: p-1 steps; at step s rank r adds chunk (r-s-1) % p into rank r+1.

    Chunk c starts its trip at rank c+1 and arrives, complete, at rank c after
    p-1 hops, so rank r ends with the full sum of chunk r.
    """
    _check_p(p)
    r = np.arange(p)
    steps = _ring_phase(r, (r + 1) % p, Rotation(base=(r - 1) % p, modulus=p), True, p - 1)
    return Schedule("ring_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def ring_all_gather(p: int) -> Schedule:
    """Ring all-gather: p-1 steps; at step s rank r copies chunk (r-s) % p to rank r+1."""
    _check_p(p)
    r = np.arange(p)
    steps = _ring_phase(r, (r + 1) % p, Rotation(base=r, modulus=p), False, p - 1)
    return Schedule("ring_all_gather", "all_gather", p, p, tuple(steps))


def ring_all_reduce(p: int) -> Schedule:
    """Ring all-reduce: ring reduce-scatter, then ring all-gather (2(p-1) steps, p chunks)."""
    return ring_reduce_scatter(p).then(ring_all_gather(p), "ring_all_reduce", "all_reduce")


def naive_all_reduce(p: int, root: int = 0) -> Schedule:
    """Everyone sends the whole buffer to ``root``, which sums, then sends the sum back.

    Two steps, but the root receives p-1 buffers in the first and sends p-1 in
    the second: its link carries 2(p-1)·n bytes.
    """
    _check_p(p, root)
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
    _check_p(p, root)
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
    _check_p(p, root)
    steps, mask = [], 1
    while mask < p:
        v = np.arange(mask, p, 2 * mask)
        steps.append(Step.columns((v + root) % p, (v - mask + root) % p, 0, 1, True))
        mask *= 2
    return Schedule("binomial_reduce", "reduce", p, 1, tuple(steps), root)


def recursive_halving_reduce_scatter(p: int) -> Schedule:
    """Recursive halving: lg p steps; partners 2**k apart swap and add half of what they hold.

    Each rank keeps the half that contains its own chunk, so the range it is
    responsible for halves every step and ends as chunk r. Power-of-two p only.
    """
    _check_p(p)
    _require_pow2(p, "recursive_halving_reduce_scatter")
    r = np.arange(p)
    lo, hi = np.zeros(p, dtype=np.int64), np.full(p, p, dtype=np.int64)
    steps, mask = [], p // 2
    while mask >= 1:
        mid = (lo + hi) // 2
        upper = (r & mask) != 0  # this rank keeps the upper half and sends the lower one
        send_lo, send_hi = np.where(upper, lo, mid), np.where(upper, mid, hi)
        steps.append(Step.columns(r, r ^ mask, send_lo, send_hi, True))
        lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
        mask //= 2
    return Schedule("recursive_halving_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def recursive_doubling_all_gather(p: int) -> Schedule:
    """Recursive doubling all-gather: lg p steps; partners 2**k apart swap all they hold.

    What each rank holds doubles every step: an aligned block of 2**k chunks
    that contains its own. Power-of-two p only.
    """
    _check_p(p)
    _require_pow2(p, "recursive_doubling_all_gather")
    r = np.arange(p)
    steps, mask = [], 1
    while mask < p:
        lo = r - r % mask  # the aligned block of `mask` chunks this rank holds
        steps.append(Step.columns(r, r ^ mask, lo, lo + mask, False))
        mask *= 2
    return Schedule("recursive_doubling_all_gather", "all_gather", p, p, tuple(steps))


def _fold(p: int, inner: Schedule, name: str) -> Schedule:
    """Run a power-of-two all-reduce on p ranks that are not a power of two (as MPICH does).

    With q the largest power of two below p and e = p - q extra ranks: first the
    even ranks 0, 2, .., 2e-2 add their whole buffer into their odd neighbour,
    then the q remaining ranks run ``inner``, then the odd ranks copy the result
    back. That costs two extra steps that move the whole buffer.
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


def _largest_pow2_at_most(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def recursive_doubling_all_reduce(p: int) -> Schedule:
    """Recursive doubling all-reduce: lg p steps; partners 2**k apart swap and add everything.

    For p not a power of two, the extra ranks are folded in first (see ``_fold``).
    """
    _check_p(p)
    name = "recursive_doubling_all_reduce"
    q = _largest_pow2_at_most(p)
    r = np.arange(q)
    steps, mask = [], 1
    while mask < q:
        steps.append(Step.columns(r, r ^ mask, 0, 1, True))
        mask *= 2
    inner = Schedule(name, "all_reduce", q, 1, tuple(steps))
    return inner if q == p else _fold(p, inner, name)


def rabenseifner_all_reduce(p: int) -> Schedule:
    """Rabenseifner all-reduce: halving reduce-scatter, then doubling all-gather.

    For p not a power of two, the extra ranks are folded in first (see ``_fold``);
    the buffer is then cut into q chunks, q the largest power of two below p.
    """
    _check_p(p)
    name = "rabenseifner_all_reduce"
    q = _largest_pow2_at_most(p)
    inner = recursive_halving_reduce_scatter(q).then(
        recursive_doubling_all_gather(q), name, "all_reduce"
    )
    return inner if q == p else _fold(p, inner, name)


def hierarchical_all_reduce(p: int, ranks_per_node: int) -> Schedule:
    """Two-level all-reduce on p ranks, ``ranks_per_node`` per node; node j is ranks j*k .. j*k+k-1.

    1. reduce-scatter on a ring inside each node: local rank l ends with piece l
       (1/k of the buffer) summed over its node;
    2. all-reduce of piece l on a ring across the nodes, among the ranks with
       local rank l (one ring per local rank, all at once);
    3. all-gather on a ring inside each node.

    This is what HCCL runs across A2 servers and what ASTRA-sim's
    ``localBWAware`` does on two dimensions: per rank, only 1/k of the buffer
    crosses the slow inter-node links. With m = p/k nodes the buffer is cut
    into p chunks; piece l is chunks ``l*m .. l*m + m-1``. Steps: 2(k-1) + 2(m-1),
    each phase a :class:`Rotation`, so 4096 ranks build in milliseconds.
    """
    k = ranks_per_node
    if p < 1 or k < 1 or p % k:
        raise ScheduleError(f"ranks_per_node={k} must divide the world size {p}")
    m = p // k
    r = np.arange(p)
    node, local = r // k, r % k
    beside = node * k + (local + 1) % k  # next rank on the same node
    across = ((node + 1) % m) * k + local  # same local rank on the next node
    steps = [
        *_ring_phase(r, beside, Rotation(base=(local - 1) % k, modulus=k, count=m, scale=m),
                     True, k - 1),
        *_ring_phase(r, across, Rotation(base=(node - 1) % m, modulus=m, offset=local * m),
                     True, m - 1),
        *_ring_phase(r, across, Rotation(base=node, modulus=m, offset=local * m), False, m - 1),
        *_ring_phase(r, beside, Rotation(base=local, modulus=k, count=m, scale=m), False, k - 1),
    ]  # fmt: skip
    note = f"{m} node(s) of {k} rank(s)"
    return Schedule("hierarchical_all_reduce", "all_reduce", p, p, tuple(steps), note=note)


#: Every shipped schedule builder, by name.
BUILDERS: dict[str, Callable[[int], Schedule]] = {
    f.__name__: f
    for f in (
        ring_reduce_scatter,
        ring_all_gather,
        ring_all_reduce,
        naive_all_reduce,
        binomial_broadcast,
        binomial_reduce,
        recursive_halving_reduce_scatter,
        recursive_doubling_all_gather,
        recursive_doubling_all_reduce,
        rabenseifner_all_reduce,
    )
}


def supports(builder: str | Callable[[int], Schedule], p: int) -> bool:
    """Whether a builder accepts world size ``p`` (some need a power of two)."""
    build = BUILDERS[builder] if isinstance(builder, str) else builder
    try:
        build(p)
    except ScheduleError:
        return False
    return True
