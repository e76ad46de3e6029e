"""What a schedule is: steps of transfers between ranks, and how a buffer is cut into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

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


def chunk_bounds(n: int, num_chunks: int) -> list[int]:
    """Offsets of the chunks of an n-element buffer, as ``torch.tensor_split`` cuts it."""
    base, extra = divmod(n, num_chunks)
    bounds = [0]
    for c in range(num_chunks):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds
