"""What a schedule is: steps of transfers between ranks, and how a buffer is cut into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


class ScheduleError(ValueError):
    """A schedule cannot be built, or does not compute its collective."""


def check_world_size(p: int, root: int = 0) -> None:
    """Raise a ScheduleError unless ``p >= 1`` and ``root`` is one of its ranks."""
    if p < 1:
        raise ScheduleError(f"world size must be at least 1, got {p}")
    if not 0 <= root < p:
        raise ScheduleError(f"root {root} is not a rank of a group of {p}")


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


@dataclass(frozen=True)
class Rotation:
    """Where the chunks of a rotating step are: the rule every ring follows.

    Transfer i of a step with shift ``s`` sends ``count`` chunks starting at
    ``offset + scale * ((base + s) % modulus)`` (each field a scalar or one value
    per transfer). A ring's steps differ only by ``s``, so p - 1 steps share one
    rotation and their sources and destinations: nothing per step is stored, and
    a 4096-rank ring (33 million transfers) builds in milliseconds.
    """

    base: np.ndarray | int
    modulus: np.ndarray | int
    count: np.ndarray | int = 1
    offset: np.ndarray | int = 0
    scale: np.ndarray | int = 1

    def start(self, shift: int) -> np.ndarray:
        """First chunk of each transfer at this shift."""
        return self.offset + self.scale * ((self.base + shift) % self.modulus)

    def chunk_range(self) -> tuple[int, int]:
        """The lowest first chunk and the highest stop over every shift (for validation)."""
        first = np.asarray(self.offset)
        last = first + self.scale * (np.asarray(self.modulus) - 1)
        lo = np.minimum(first, last).min()
        hi = (np.maximum(first, last) + self.count).max()
        return int(lo), int(hi)


class Step:
    """The transfers of one step, stored as columns (one numpy array per field).

    ``src``, ``dst``, ``start``, ``stop`` (chunks ``start..stop-1`` are sent) and
    ``reduce`` are arrays with one entry per transfer. Iterate over a step to get
    :class:`Transfer` tuples. A step built with :meth:`rotating` computes ``start``
    and ``stop`` from a :class:`Rotation` when asked, so the steps of a big ring
    cost no memory.

    The transfers of a step happen at the same time: every rank sends what it held at
    the *start* of the step, then applies what it received, in the order the transfers
    are listed. Two ranks that swap the same chunk (recursive doubling) therefore both
    end with the sum.
    """

    __slots__ = ("src", "dst", "reduce", "_start", "_stop", "rotation", "shift")

    def __init__(self, src, dst, start, stop, reduce) -> None:  # noqa: ANN001 - arrays
        self.src, self.dst, self.reduce = src, dst, reduce
        self._start, self._stop = start, stop
        self.rotation: Rotation | None = None
        self.shift = 0

    @classmethod
    def rotating(
        cls, src: np.ndarray, dst: np.ndarray, reduce: np.ndarray, rotation: Rotation, shift: int
    ) -> Step:
        """A step whose chunks follow ``rotation`` at ``shift`` (arrays are shared, not copied)."""
        st = cls(src, dst, None, None, reduce)
        st.rotation, st.shift = rotation, shift
        return st

    @property
    def start(self) -> np.ndarray:
        """First chunk each transfer sends."""
        if self.rotation is None:
            return self._start
        return np.broadcast_to(self.rotation.start(self.shift), self.src.shape)

    @property
    def stop(self) -> np.ndarray:
        """One past the last chunk each transfer sends."""
        if self.rotation is None:
            return self._stop
        return self.start + self.rotation.count

    @property
    def count(self) -> np.ndarray:
        """How many chunks each transfer sends (for a rotating step, without computing starts)."""
        if self.rotation is None:
            return self._stop - self._start
        return np.broadcast_to(self.rotation.count, self.src.shape)

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

    def __repr__(self) -> str:
        """The step as its columns: ``Step(src=[0, 1], dst=[1, 0], start=..., ...)``."""
        fields = ("src", "dst", "start", "stop", "reduce")
        return "Step(" + ", ".join(f"{f}={_column(getattr(self, f))}" for f in fields) + ")"

    def __iter__(self) -> Iterator[Transfer]:
        start, stop = self.start, self.stop
        for i in range(len(self)):
            chunks = range(int(start[i]), int(stop[i]))
            yield Transfer(int(self.src[i]), int(self.dst[i]), chunks, bool(self.reduce[i]))

    def transfer(self, i: int) -> Transfer:
        """The i-th transfer of the step."""
        chunks = range(int(self.start[i]), int(self.stop[i]))
        return Transfer(int(self.src[i]), int(self.dst[i]), chunks, bool(self.reduce[i]))

    def involving(self, rank: int) -> list[Transfer]:
        """The transfers this rank sends or receives, in the step's order."""
        return [self.transfer(i) for i in np.flatnonzero((self.src == rank) | (self.dst == rank))]

    def mapped(self, ranks: np.ndarray) -> Step:
        """The same step with every rank ``r`` renamed ``ranks[r]``."""
        if self.rotation is not None:
            src, dst = ranks[self.src], ranks[self.dst]
            return Step.rotating(src, dst, self.reduce, self.rotation, self.shift)
        return Step(ranks[self.src], ranks[self.dst], self.start, self.stop, self.reduce)

    def invalid(self, p: int, k: int, seen: dict | None = None) -> np.ndarray | None:
        """Mask of the transfers that are not valid for p ranks and k chunks (None: all valid).

        ``seen`` caches what was already checked for arrays and rotations that
        several steps share, so validating a big ring costs one check per phase.
        """
        seen = {} if seen is None else seen
        key = (id(self.src), id(self.dst))
        if key not in seen:
            s, d = self.src, self.dst
            seen[key] = ((s < 0) | (s >= p) | (d < 0) | (d >= p) | (s == d)).any()
        bad_ranks = seen[key]
        if self.rotation is not None:
            rkey = id(self.rotation)
            if rkey not in seen:
                lo, hi = self.rotation.chunk_range()
                seen[rkey] = lo < 0 or hi > k or np.min(self.rotation.count) < 1
            if not (bad_ranks or seen[rkey]):
                return None
        s, d, a, b = self.src, self.dst, self.start, self.stop
        bad = (s < 0) | (s >= p) | (d < 0) | (d >= p) | (s == d) | (a < 0) | (b > k) | (a >= b)
        return bad if bad.any() else None


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
        p, k, seen = self.world_size, self.num_chunks, {}
        for i, st in enumerate(self.steps):
            bad = st.invalid(p, k, seen)
            if bad is not None:
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


def _column(values: np.ndarray) -> str:
    """A column as a list, elided in the middle when it is long (a 4096-rank step stays short)."""
    values = np.asarray(values)
    if values.size <= 12:
        return str(values.tolist())
    head, tail = values[:3].tolist(), values[-3:].tolist()
    return f"[{', '.join(map(str, head))}, ..., {', '.join(map(str, tail))}] ({values.size})"


def chunk_bounds(n: int, num_chunks: int) -> list[int]:
    """Offsets of the chunks of an n-element buffer, as ``torch.tensor_split`` cuts it.

    Sizes differ by at most one element, the larger chunks first; chunks may be empty
    when ``n < num_chunks``.
    """
    base, extra = divmod(n, num_chunks)
    bounds = [0]
    for c in range(num_chunks):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds
