"""The cost of any schedule: bytes and messages per rank and step, turned into a time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from labsupport.costmodel.formulas import PORTS
from labsupport.schedules import Schedule, chunk_bounds

# ---------------------------------------------------------------------------
# The cost of a schedule.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What a schedule moves, per step (rows) and per rank (columns). Bytes may be fractional.

    Build it with :func:`cost`; get a time with :meth:`time`. ``ports="one"``
    (the default, the classic model): in a step a rank sends one stream and
    receives one, so its messages queue. ``ports="all"``: every ordered pair of
    ranks has its own link (a full mesh, as HCCS in an A2 server or NVSwitch),
    so a rank's messages to different ranks travel at once.
    """

    name: str
    nbytes: float
    sent: np.ndarray  # bytes each rank sends in each step
    received: np.ndarray  # bytes each rank receives in each step
    reduced: np.ndarray  # bytes each rank adds into its buffer in each step
    messages_out: np.ndarray  # messages each rank sends in each step
    messages_in: np.ndarray  # messages each rank receives in each step
    schedule: Schedule | None = field(default=None, repr=False, compare=False)
    offsets: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def steps(self) -> int:
        """Number of steps."""
        return self.sent.shape[0]

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.sent.shape[1]

    @property
    def sent_per_rank(self) -> np.ndarray:
        """Total bytes each rank sends."""
        return self.sent.sum(axis=0)

    @property
    def received_per_rank(self) -> np.ndarray:
        """Total bytes each rank receives."""
        return self.received.sum(axis=0)

    def step_times(
        self, alpha: float, beta: float, gamma: float = 0.0, ports: str = "one"
    ) -> np.ndarray:
        """Time of each step: its busiest rank's alpha*messages + beta*bytes + gamma*reduced.

        With ``ports="all"`` a rank's messages and bytes are those of its busiest link.
        """
        if ports not in PORTS:
            raise ValueError(f"ports must be one of {PORTS}, not {ports!r}")
        if self.steps == 0:
            return np.zeros(0)
        # ports="all", for a full mesh (HCCS, NVSwitch): every ordered pair of ranks has its
        # own link, so a step lasts as long as its busiest link; the direct (mesh)
        # algorithms are built for it.
        if ports == "all":
            return self._mesh_step_times(alpha, beta, gamma)
        # The model's usual rule: in a step every rank can send one stream and receive one
        # stream at once (full duplex, one port), so a step lasts as long as its busiest rank:
        #     step time = max over ranks of alpha*messages + beta*bytes + gamma*bytes reduced
        # where messages and bytes are the larger of what the rank sends and receives. For the
        # shipped schedules this gives back the closed forms exactly, for every world size
        # they accept (tests/core/test_costmodel.py checks it).
        per_rank = (
            alpha * np.maximum(self.messages_out, self.messages_in)
            + beta * np.maximum(self.sent, self.received)
            + gamma * self.reduced
        )
        return per_rank.max(axis=1)

    def _mesh_step_times(self, alpha: float, beta: float, gamma: float) -> np.ndarray:
        """Step times when every ordered pair has its own link: each rank's busiest link counts."""
        if self.schedule is None or self.offsets is None:
            raise ValueError("ports='all' needs a Cost built by cost(schedule, nbytes)")
        p, out = self.world_size, np.zeros(self.steps)
        for i, st in enumerate(self.schedule.steps):
            if len(st) == 0:
                continue
            pair, where = np.unique(st.src * p + st.dst, return_inverse=True)
            size = self.offsets[st.stop] - self.offsets[st.start]
            link = alpha * np.bincount(where) + beta * np.bincount(where, weights=size)
            busiest = np.zeros(p)
            np.maximum.at(busiest, pair // p, link)
            np.maximum.at(busiest, pair % p, link)
            out[i] = (busiest + gamma * self.reduced[i]).max()
        return out

    def time(self, alpha: float, beta: float, gamma: float = 0.0, ports: str = "one") -> float:
        """Modelled time of the whole schedule, in seconds if alpha, beta, gamma are."""
        return float(self.step_times(alpha, beta, gamma, ports).sum())


def chunk_bytes(nbytes: float, num_chunks: int, itemsize: int | None = None) -> np.ndarray:
    """Size in bytes of each chunk of an ``nbytes`` buffer.

    With ``itemsize`` (bytes per element) the buffer is cut as the executed
    schedule cuts it, whole elements per chunk (``torch.tensor_split``); without
    it, into equal fractional pieces, as the closed forms assume (n/p each).
    """
    if itemsize is None:
        return np.full(num_chunks, nbytes / num_chunks)
    numel, rest = divmod(int(nbytes), itemsize)
    if rest:
        raise ValueError(f"{nbytes} bytes is not a whole number of {itemsize}-byte elements")
    return np.diff(chunk_bounds(numel, num_chunks)).astype(float) * itemsize


def cost(schedule: Schedule, nbytes: float, itemsize: int | None = None) -> Cost:
    """Count the bytes and messages each rank sends, receives and reduces in each step.

    What the schedule really does, not a formula: :meth:`Cost.time` turns it into seconds.

    ``nbytes`` is the size of one rank's buffer; see :func:`chunk_bytes` for ``itemsize``.
    """
    p, steps = schedule.world_size, len(schedule.steps)
    offsets = np.concatenate([[0.0], np.cumsum(chunk_bytes(nbytes, schedule.num_chunks, itemsize))])
    sent, received, reduced = (np.empty((steps, p)) for _ in range(3))
    messages_out, messages_in = (np.empty((steps, p), dtype=np.int32) for _ in range(2))
    for i, st in enumerate(schedule.steps):
        size = offsets[st.stop] - offsets[st.start]
        sent[i] = np.bincount(st.src, weights=size, minlength=p)
        received[i] = np.bincount(st.dst, weights=size, minlength=p)
        reduced[i] = np.bincount(st.dst, weights=size * st.reduce, minlength=p)
        messages_out[i] = np.bincount(st.src, minlength=p)
        messages_in[i] = np.bincount(st.dst, minlength=p)
    return Cost(
        schedule.name, nbytes, sent, received, reduced, messages_out, messages_in, schedule, offsets
    )


def schedule_time(
    schedule: Schedule,
    nbytes: float,
    alpha: float,
    beta: float,
    gamma: float = 0.0,
    ports: str = "one",
) -> float:
    """Modelled time of a schedule on an ``nbytes`` buffer (shorthand for ``cost(...).time``)."""
    return cost(schedule, nbytes).time(alpha, beta, gamma, ports)
