"""The cost of any schedule: bytes and messages per rank and step, turned into a time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labsupport.schedules import Schedule, chunk_bounds

# ---------------------------------------------------------------------------
# The cost of a schedule.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What a schedule moves, per step (rows) and per rank (columns). Bytes may be fractional.

    Build it with :func:`cost`; get a time with :meth:`time`.
    """

    name: str
    nbytes: float
    sent: np.ndarray  # bytes each rank sends in each step
    received: np.ndarray  # bytes each rank receives in each step
    reduced: np.ndarray  # bytes each rank adds into its buffer in each step
    messages_out: np.ndarray  # messages each rank sends in each step
    messages_in: np.ndarray  # messages each rank receives in each step

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

    def step_times(self, alpha: float, beta: float, gamma: float = 0.0) -> np.ndarray:
        """Time of each step: its busiest rank's alpha*messages + beta*bytes + gamma*reduced."""
        if self.steps == 0:
            return np.zeros(0)
        per_rank = (
            alpha * np.maximum(self.messages_out, self.messages_in)
            + beta * np.maximum(self.sent, self.received)
            + gamma * self.reduced
        )
        return per_rank.max(axis=1)

    def time(self, alpha: float, beta: float, gamma: float = 0.0) -> float:
        """Modelled time of the whole schedule, in seconds if alpha, beta, gamma are."""
        return float(self.step_times(alpha, beta, gamma).sum())


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
    return Cost(schedule.name, nbytes, sent, received, reduced, messages_out, messages_in)


def schedule_time(
    schedule: Schedule, nbytes: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Modelled time of a schedule on an ``nbytes`` buffer (shorthand for ``cost(...).time``)."""
    return cost(schedule, nbytes).time(alpha, beta, gamma)
