"""Collective algorithms written once, as data.

A *schedule* is a list of steps. A step is a set of transfers that happen at
the same time. A transfer says: rank ``src`` sends the chunks ``chunks`` of
its buffer to rank ``dst``, and ``dst`` either adds them into its own copy
(``reduce=True``) or overwrites its copy with them (``reduce=False``).

The buffer (a tensor of ``n`` elements) is cut into ``num_chunks`` chunks the
way ``torch.tensor_split`` does it: sizes differ by at most one element, the
larger chunks first, and chunks may be empty when ``n < num_chunks``.

One schedule is used three ways:

- executed on a real process group: :func:`execute`;
- costed with the alpha-beta-gamma model: :func:`labsupport.costmodel.cost`;
- animated, step by step: :mod:`labsupport.viz.schedule`.

Example, ring all-reduce on 4 ranks::

    sched = ring_all_reduce(4)
    print(format_steps(sched))       # who sends which chunk to whom, step by step
    verify(sched)                    # the schedule really computes an all-reduce
    execute(sched, tensor)           # on every rank of an initialised process group

Within a step every rank sends what it held at the *start* of the step, then
applies what it received, in the order the transfers are listed. Two ranks
that swap the same chunk (recursive doubling) therefore both end with the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


class ScheduleError(ValueError):
    """A schedule cannot be built, or does not compute its collective."""


class Transfer(NamedTuple):
    """One message: ``src`` sends ``chunks`` to ``dst``, which adds them or overwrites its copy."""

    src: int
    dst: int
    chunks: range
    reduce: bool

    def __str__(self) -> str:
        c = self.chunks
        which = f"c{c.start}" if len(c) == 1 else f"c{c.start}..c{c.stop - 1}"
        return f"{self.src}->{self.dst} {which} ({'+=' if self.reduce else '='})"


@dataclass(frozen=True, eq=False)
class Step:
    """The transfers of one step, stored as columns (one numpy array per field).

    Columns keep a 1024-rank ring (two million transfers) fast to build and to
    cost. Iterate over a step to get :class:`Transfer` tuples.
    """

    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray  # first chunk sent (inclusive)
    stop: np.ndarray  # last chunk sent (exclusive)
    reduce: np.ndarray

    @classmethod
    def of(cls, transfers: Iterable[Transfer]) -> Step:
        """Build a step from a list of transfers."""
        ts = list(transfers)
        return cls(
            src=np.array([t.src for t in ts], dtype=np.int64),
            dst=np.array([t.dst for t in ts], dtype=np.int64),
            start=np.array([t.chunks.start for t in ts], dtype=np.int64),
            stop=np.array([t.chunks.stop for t in ts], dtype=np.int64),
            reduce=np.array([t.reduce for t in ts], dtype=bool),
        )

    @classmethod
    def columns(cls, src, dst, start, stop, reduce) -> Step:  # noqa: ANN001 - array-likes
        """Build a step from whole columns (numpy arrays or scalars, broadcast together)."""
        shape = np.broadcast_shapes(*(np.shape(c) for c in (src, dst, start, stop, reduce)))
        ints = [np.broadcast_to(c, shape).astype(np.int64) for c in (src, dst, start, stop)]
        return cls(*ints, np.broadcast_to(reduce, shape).astype(bool))

    def __len__(self) -> int:
        return len(self.src)

    def __iter__(self) -> Iterator[Transfer]:
        return (self.transfer(i) for i in range(len(self)))

    def transfer(self, i: int) -> Transfer:
        """The i-th transfer of the step."""
        chunks = range(int(self.start[i]), int(self.stop[i]))
        return Transfer(int(self.src[i]), int(self.dst[i]), chunks, bool(self.reduce[i]))

    def involving(self, rank: int) -> list[Transfer]:
        """The transfers this rank sends or receives, in the step's order."""
        return [self.transfer(i) for i in np.flatnonzero((self.src == rank) | (self.dst == rank))]

    def mapped(self, ranks: np.ndarray) -> Step:
        """The same step with every rank ``r`` renamed ``ranks[r]``."""
        return Step(ranks[self.src], ranks[self.dst], self.start, self.stop, self.reduce)


@dataclass(frozen=True)
class Schedule:
    """A collective algorithm as data: ``steps`` of transfers between ``world_size`` ranks.

    ``collective`` names what the schedule computes (one of ``COLLECTIVES``);
    ``root`` matters for broadcast and reduce. For reduce_scatter and
    all_gather, rank ``r`` owns chunk ``r`` (as in ``dist.reduce_scatter``).
    """

    name: str
    collective: str
    world_size: int
    num_chunks: int
    steps: tuple[Step, ...] = field(repr=False)
    root: int = 0
    note: str = ""

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ScheduleError(f"unknown collective {self.collective!r}; use one of {COLLECTIVES}")
        if self.world_size < 1 or self.num_chunks < 1:
            raise ScheduleError("world_size and num_chunks must be at least 1")
        p, k = self.world_size, self.num_chunks
        for i, st in enumerate(self.steps):
            bad = (
                (st.src < 0) | (st.src >= p) | (st.dst < 0) | (st.dst >= p) | (st.src == st.dst)
                | (st.start < 0) | (st.stop > k) | (st.start >= st.stop)
            )  # fmt: skip
            if bad.any():
                t = next(t for j, t in enumerate(st) if bad[j])
                raise ScheduleError(f"{self.name}: step {i} has an invalid transfer {t}")

    def __len__(self) -> int:
        return len(self.steps)

    def then(self, other: Schedule, name: str, collective: str) -> Schedule:
        """This schedule's steps followed by ``other``'s (e.g. reduce-scatter then all-gather)."""
        if (self.world_size, self.num_chunks) != (other.world_size, other.num_chunks):
            raise ScheduleError("can only compose schedules with the same world_size and chunks")
        return Schedule(
            name, collective, self.world_size, self.num_chunks, self.steps + other.steps, self.root
        )


# ---------------------------------------------------------------------------
# Builders. Each returns a Schedule for p ranks.
# ---------------------------------------------------------------------------


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


def ring_reduce_scatter(p: int) -> Schedule:
    """Ring reduce-scatter: p-1 steps; at step s rank r adds chunk (r-s-1) % p into rank r+1.

    Chunk c starts its trip at rank c+1 and arrives, complete, at rank c after
    p-1 hops, so rank r ends with the full sum of chunk r.
    """
    _check_p(p)
    r = np.arange(p)
    steps = [
        Step.columns(
            src=r, dst=(r + 1) % p, start=(r - s - 1) % p, stop=(r - s - 1) % p + 1, reduce=True
        )  # fmt: skip
        for s in range(p - 1)
    ]
    return Schedule("ring_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def ring_all_gather(p: int) -> Schedule:
    """Ring all-gather: p-1 steps; at step s rank r copies chunk (r-s) % p to rank r+1."""
    _check_p(p)
    r = np.arange(p)
    steps = [
        Step.columns(src=r, dst=(r + 1) % p, start=(r - s) % p, stop=(r - s) % p + 1, reduce=False)
        for s in range(p - 1)
    ]
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


# ---------------------------------------------------------------------------
# What a schedule computes: replay it on sets of contributions.
# ---------------------------------------------------------------------------


def chunk_bounds(n: int, num_chunks: int) -> list[int]:
    """Offsets of the chunks of an n-element buffer, as ``torch.tensor_split`` cuts it."""
    base, extra = divmod(n, num_chunks)
    bounds = [0]
    for c in range(num_chunks):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds


def initial_owner(schedule: Schedule) -> np.ndarray:
    """Whose input each rank's chunks hold before the first step: a (p, chunks) array, -1 for none.

    Rank r holds its own input, except in a broadcast (only the root has data)
    and an all-gather (rank r has only chunk r).
    """
    p, k, kind = schedule.world_size, schedule.num_chunks, schedule.collective
    owner = np.repeat(np.arange(p)[:, None], k, axis=1)
    if kind == "broadcast":
        owner[np.arange(p) != schedule.root] = -1
    elif kind == "all_gather":
        owner[np.arange(p)[:, None] != np.arange(k)[None, :]] = -1
    return owner


def initial_state(schedule: Schedule) -> list[list[int]]:
    """Whose inputs each rank's chunks hold before the first step, as bit sets.

    ``state[r][c]`` has bit i set when the chunk contains rank i's input;
    0 means the chunk holds nothing useful yet.
    """
    return [[1 << int(o) if o >= 0 else 0 for o in row] for row in initial_owner(schedule)]


def expected_state(schedule: Schedule) -> list[list[int | None]]:
    """What each rank's chunks must hold at the end (None: anything is allowed)."""
    p, k, kind, root = schedule.world_size, schedule.num_chunks, schedule.collective, schedule.root
    everyone = (1 << p) - 1
    if kind == "all_reduce":
        return [[everyone] * k for _ in range(p)]
    if kind == "reduce_scatter":
        return [[everyone if c == r else None for c in range(k)] for r in range(p)]
    if kind == "all_gather":
        return [[1 << c for c in range(k)] for _ in range(p)]
    if kind == "broadcast":
        return [[1 << root] * k for _ in range(p)]
    return [[everyone if r == root else None] * k for r in range(p)]  # reduce


def simulate(schedule: Schedule) -> list[list[list[int]]]:
    """Replay the schedule on bit sets of contributions; return the state after each step.

    The result has ``len(schedule) + 1`` states (the first is the initial one).
    Raises :class:`ScheduleError` when a rank sends a chunk that holds nothing,
    adds a contribution twice, or is written twice in one step.
    """
    state = initial_state(schedule)
    history = [[row[:] for row in state]]
    for i, st in enumerate(schedule.steps):
        before = [row[:] for row in state]  # sends read the start-of-step state
        written: dict[tuple[int, int], bool] = {}
        for t in st:
            for c in t.chunks:
                sent = before[t.src][c]
                where = f"step {i}, {t}: chunk {c}"
                if sent == 0:
                    raise ScheduleError(f"{where}: rank {t.src} sends a chunk that holds no data")
                if (t.dst, c) in written and not (t.reduce and written[(t.dst, c)]):
                    raise ScheduleError(f"{where}: rank {t.dst} is written twice in one step")
                written[(t.dst, c)] = t.reduce
                if t.reduce:
                    if state[t.dst][c] & sent:
                        twice = sorted(_members(state[t.dst][c] & sent))
                        raise ScheduleError(
                            f"{where}: rank {t.dst} would add the input of rank(s) {twice} twice"
                        )
                    state[t.dst][c] |= sent
                else:
                    state[t.dst][c] = sent
        history.append([row[:] for row in state])
    return history


def _members(bits: int) -> list[int]:
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


def verify(schedule: Schedule) -> None:
    """Raise :class:`ScheduleError` unless the schedule computes its collective."""
    final = simulate(schedule)[-1]
    for r, (got_row, want_row) in enumerate(zip(final, expected_state(schedule), strict=True)):
        for c, (got, want) in enumerate(zip(got_row, want_row, strict=True)):
            if want is not None and got != want:
                raise ScheduleError(
                    f"{schedule.name}: after the last step rank {r}'s chunk {c} holds the inputs "
                    f"of ranks {_members(got)}, expected {_members(want)}"
                )


def coverage(schedule: Schedule) -> Iterator[np.ndarray]:
    """For each state (initial, then after each step), how many inputs each chunk holds.

    Yields a read-only ``(world_size, num_chunks)`` integer array, reused from one
    step to the next (copy it to keep it). Unlike :func:`simulate` it checks
    nothing, but it is vectorised: a 1024-rank ring replays in well under a second.
    """
    count = (initial_owner(schedule) >= 0).astype(np.int64)
    view = count.view()
    view.flags.writeable = False
    yield view
    for st in schedule.steps:
        src, dst, chunk, reduce = _per_chunk(st)
        sent = count[src, chunk]  # a copy: what the senders held at the start of the step
        count[dst[~reduce], chunk[~reduce]] = sent[~reduce]
        np.add.at(count, (dst[reduce], chunk[reduce]), sent[reduce])
        yield view


def _per_chunk(st: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The step's transfers split into one row per chunk: (src, dst, chunk, reduce)."""
    lens = st.stop - st.start
    first = np.repeat(np.cumsum(lens) - lens, lens)
    chunk = np.arange(lens.sum()) - first + np.repeat(st.start, lens)
    return np.repeat(st.src, lens), np.repeat(st.dst, lens), chunk, np.repeat(st.reduce, lens)


def format_steps(schedule: Schedule) -> str:
    """A Markdown table: one row per step, one column per rank, the transfer(s) it sends."""
    p = schedule.world_size
    lines = [
        "| step | " + " | ".join(f"rank {r} sends" for r in range(p)) + " |",
        "|---" * (p + 1) + "|",
    ]
    for i, st in enumerate(schedule.steps):
        cells = [[] for _ in range(p)]
        for t in st:
            cells[t.src].append(str(t)[len(str(t.src)) :])
        lines.append(f"| {i} | " + " | ".join(", ".join(c) or "-" for c in cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Running a schedule on a real process group.
# ---------------------------------------------------------------------------

_COMBINE: dict = {
    dist.ReduceOp.SUM: lambda mine, got: mine.add_(got),
    dist.ReduceOp.PRODUCT: lambda mine, got: mine.mul_(got),
    dist.ReduceOp.MIN: lambda mine, got: torch.minimum(mine, got, out=mine),
    dist.ReduceOp.MAX: lambda mine, got: torch.maximum(mine, got, out=mine),
}


def execute(
    schedule: Schedule,
    tensor: torch.Tensor,
    op: dist.ReduceOp = dist.ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Run ``schedule`` on this rank's ``tensor``, in place; every rank of ``group`` calls it.

    The tensor (contiguous, any shape and length) is cut into
    ``schedule.num_chunks`` chunks as :func:`chunk_bounds` says. Each step posts
    all of this rank's sends and receives at once (``dist.batch_isend_irecv``),
    waits for them, then adds in or copies what arrived. Empty chunks are not
    sent at all: both ends know their size.

    On return the tensor holds what the collective promises: the reduction
    everywhere for all_reduce, on the root for reduce, chunk r on rank r for
    reduce_scatter; the other chunks hold partial results. ``op`` is SUM,
    PRODUCT, MIN or MAX. Run here on gloo only; with NCCL, note that the first
    ``batch_isend_irecv`` of a group must involve every rank of it.
    """
    p, me = dist.get_world_size(group), dist.get_rank(group)
    if p != schedule.world_size:
        raise ScheduleError(f"{schedule.name} is built for {schedule.world_size} ranks, not {p}")
    if not tensor.is_contiguous():
        raise ValueError("execute needs a contiguous tensor (call .contiguous() first)")
    if op not in _COMBINE:
        raise ValueError(f"execute supports SUM, PRODUCT, MIN and MAX, not {op}")
    flat = tensor.view(-1)
    bounds = chunk_bounds(flat.numel(), schedule.num_chunks)

    def part(chunks: range) -> torch.Tensor:  # a view of the chunks, no copy
        return flat[bounds[chunks.start] : bounds[chunks.stop]]

    def global_rank(r: int) -> int:
        return r if group is None else dist.get_global_rank(group, r)

    for step in schedule.steps:
        mine = step.involving(me)
        sends = [t for t in mine if t.src == me]
        recvs = [t for t in mine if t.dst == me and part(t.chunks).numel() > 0]
        sending = {c for t in sends for c in t.chunks}
        ops = [
            dist.P2POp(dist.isend, part(t.chunks), global_rank(t.dst), group)
            for t in sends
            if part(t.chunks).numel() > 0
        ]
        landing = []  # (transfer, buffer): receives land in the tensor itself or in a buffer
        for t in recvs:
            direct = not t.reduce and sending.isdisjoint(t.chunks)
            buf = part(t.chunks) if direct else torch.empty_like(part(t.chunks))
            landing.append((t, buf, direct))
            ops.append(dist.P2POp(dist.irecv, buf, global_rank(t.src), group))
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        for t, buf, direct in landing:
            if t.reduce:
                _COMBINE[op](part(t.chunks), buf)
            elif not direct:
                part(t.chunks).copy_(buf)
    return tensor
