"""The link model: what one message costs, and which links queue behind each other.

Start at :class:`Link` (one message: ``latency + bytes / bandwidth``), then
:class:`LinkClock` (which link a message takes, and when that link is free).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labsupport.units import engineering, format_rate, format_time


@dataclass(frozen=True, repr=False)
class Link:
    """One direction of a wire: ``latency`` in seconds, ``bandwidth`` in bytes per second.

    ``str(link)`` is what a person reads (``1 ms, 50 MB/s``, 3 figures); ``repr(link)``
    is exact and pastes back as code (``Link(latency=1e-3, bandwidth=50e6)``).
    """

    latency: float
    bandwidth: float

    def __post_init__(self) -> None:
        for name in ("latency", "bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"Link {name} must be a number; got {value!r}.")
            if math.isnan(value) or math.isinf(value):
                raise ValueError(f"Link {name} must be finite; got {value!r}.")
        if self.latency < 0:
            raise ValueError(
                f"Link latency must be >= 0 seconds; got {self.latency!r} "
                "(e.g. latency=1e-3 for one millisecond)."
            )
        if self.bandwidth <= 0:
            raise ValueError(
                f"Link bandwidth must be > 0 bytes per second; got {self.bandwidth!r} "
                "(e.g. bandwidth=50e6 for 50 MB/s)."
            )

    @property
    def alpha(self) -> float:
        """α of the cost model: the latency (s)."""
        return float(self.latency)

    @property
    def beta(self) -> float:
        """β of the cost model: seconds per byte (1 / bandwidth)."""
        return 1.0 / self.bandwidth

    def time(self, nbytes: float) -> float:
        """Seconds one message of ``nbytes`` takes on an idle link."""
        # On a busy link it waits first: a link carries one message at a time in each
        # direction, and the next waits until the first has fully arrived (LinkClock).
        return self.latency + nbytes / self.bandwidth

    def __str__(self) -> str:
        return f"{format_time(self.latency)}, {format_rate(self.bandwidth)}"

    def __repr__(self) -> str:
        return f"Link(latency={engineering(self.latency)}, bandwidth={engineering(self.bandwidth)})"

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(f"Link: {self}")  # type: ignore[attr-defined] # a notebook cell's value


class LinkClock:
    """When each link is next free, in seconds on one clock shared by every rank.

    Only bookkeeping with numbers (no processes, no sleeping), so the same code times real
    messages in the runtime's emulator (:mod:`labsupport.runtime.emulator.backend`) and
    simulates whole schedules on paper in :mod:`labsupport.netem.simulate`.

    ``node_of(rank)`` says which node a rank is on; ``intra`` and ``inter`` are
    the links within and between nodes. A message is timed in two halves, so
    that each rank only needs the links it owns:

    - :meth:`send` (on the sender): when the message has left the sender's
      link, i.e. when it would arrive if nothing else were coming in;
    - :meth:`receive` (on the receiver): when it has fully arrived, after
      queueing on the receiver's incoming NIC behind earlier messages.
    """

    def __init__(self, node_of, intra: Link | None, inter: Link | None) -> None:  # noqa: ANN001
        self.node_of = node_of
        self.intra, self.inter = intra, inter
        self.free: dict[tuple, float] = {}

    def same_node(self, src: int, dst: int) -> bool:
        """Whether ``src`` and ``dst`` are on one node (their own mesh link)."""
        return self.node_of(src) == self.node_of(dst)

    def link(self, src: int, dst: int) -> Link:
        """The kind of link a message from ``src`` to ``dst`` travels on."""
        # Two ranks on the same node: their own link, one for each ordered pair (a full mesh,
        # as HCCS inside an 8-NPU Ascend server, or NVSwitch). On different nodes: the
        # sender's one outgoing NIC, then the receiver's one incoming NIC (one NIC per
        # accelerator).
        link = self.intra if self.same_node(src, dst) else self.inter
        if link is None:
            where = "within a node" if self.same_node(src, dst) else "between nodes"
            raise ValueError(f"this network has no link {where} (rank {src} -> rank {dst})")
        return link

    def send(self, src: int, dst: int, nbytes: float, now: float) -> float:
        """Queue a message on the sender's link at time ``now``; return when it has left it."""
        # Within a node the pair's own mesh link; otherwise all of a rank's sends to other
        # nodes queue on its one outgoing NIC.
        key = ("mesh", src, dst) if self.same_node(src, dst) else ("nic-out", src)
        start = max(now, self.free.get(key, -math.inf))
        done = start + self.link(src, dst).time(nbytes)
        self.free[key] = done
        return done

    def receive(self, src: int, dst: int, nbytes: float, sent: float) -> float:
        """When a message that left its sender's link at ``sent`` has fully arrived at ``dst``."""
        if self.same_node(src, dst):
            return sent
        # All of a rank's receives from other nodes queue on its one incoming NIC.
        key = ("nic-in", dst)
        done = max(sent, self.free.get(key, -math.inf) + self.link(src, dst).time(nbytes))
        self.free[key] = done
        return done

    def message(self, src: int, dst: int, nbytes: float, now: float) -> float:
        """Both halves at once (for simulation): when a message sent at ``now`` has arrived."""
        return self.receive(src, dst, nbytes, self.send(src, dst, nbytes, now))
