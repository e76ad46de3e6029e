"""The emulated wire: every message is one gloo message, a time stamp in front of the data.

A sender stamps the message with the emulated time it will have left the sender's link
(:meth:`LinkClock.send`); the receiver reads the stamp and adds the queue on its own NIC
(:meth:`LinkClock.receive`): the message's arrival. :class:`Wire` does this for one
process group (:class:`~labsupport.runtime.emulator.backend.EmulatedGroup`), over its gloo group.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from labsupport.runtime.emulator.state import STATE

#: The tag of the messages collectives send (user messages use small tags).
COLLECTIVE_TAG = 1 << 30
#: Bytes of the time stamp that travels in front of every message's data.
STAMP = 8


def nbytes_of(t: torch.Tensor) -> int:
    """The tensor's size in bytes."""
    return t.numel() * t.element_size()


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a contiguous tensor, as a flat uint8 view (no copy)."""
    if not t.is_contiguous():
        raise ValueError("Tensors must be contiguous (call .contiguous() first)")
    return t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


class Wire:
    """Stamped messages between the ranks of one group, over its gloo group ``inner``.

    ``global_ranks[i]`` is group rank i's rank in the world (the link model's ranks).
    """

    def __init__(self, inner: dist.ProcessGroup, rank: int, global_ranks: list[int]) -> None:
        self._inner = inner
        self._rank = rank
        self._global = global_ranks

    def post(self, tensor: torch.Tensor, peer: int, tag: int, now: float) -> tuple[Any, float]:
        """Start sending ``tensor`` to group rank ``peer``: (gloo work, when it leaves our link).

        One gloo message carries the 8-byte stamp (that time) and the data.
        """
        me, to = self._global[self._rank], self._global[peer]
        nbytes = nbytes_of(tensor)
        with STATE.lock:
            done = STATE.clock.send(me, to, nbytes, now)
            STATE.bytes_sent += nbytes
            STATE.messages_sent += 1
        packet = torch.empty(STAMP + nbytes, dtype=torch.uint8)
        packet[:STAMP].view(torch.float64).fill_(done)
        packet[STAMP:].copy_(as_bytes(tensor))
        return self._inner.send([packet], peer, tag), done

    def start_receive(self, tensor: torch.Tensor, peer: int, tag: int) -> tuple:
        """Start receiving into ``tensor`` from group rank ``peer`` (finish: :meth:`arrival`)."""
        packet = torch.empty(STAMP + nbytes_of(tensor), dtype=torch.uint8)
        return packet, self._inner.recv([packet], peer, tag)

    def arrival(self, tensor: torch.Tensor, peer: int, posted: tuple) -> float:
        """Wait for the packet, unpack it; when the message has fully arrived."""
        packet, work = posted
        work.wait()
        src, me = self._global[peer], self._global[self._rank]
        sent = float(packet[:STAMP].view(torch.float64).item())
        with STATE.lock:
            arrival = STATE.clock.receive(src, me, nbytes_of(tensor), sent)
        as_bytes(tensor).copy_(packet[STAMP:])
        return arrival

    def expect(self, recvs: list[tuple[torch.Tensor, int]], tag: int = COLLECTIVE_TAG) -> list:
        """Post receives of (tensor, group rank) now, for :meth:`exchange` (``posted=``).

        gloo's TCP sends wait for the peer's "receive posted" note (a rendezvous):
        posting a step ahead (as ``run_schedule`` does) lets the send go out at once.
        """
        return [(t, peer, self.start_receive(t, peer, tag)) for t, peer in recvs]

    def exchange(
        self,
        sends: list[tuple[torch.Tensor, int]],
        recvs: list[tuple[torch.Tensor, int]],
        at: float,
        tag: int = COLLECTIVE_TAG,
        posted: list | None = None,
    ) -> float:
        """Send and receive (tensor, group rank) messages at once, from emulated time ``at``.

        ``posted`` (from :meth:`expect`) replaces ``recvs``. Returns the emulated time
        all are done, once the data is here.
        """
        posted = self.expect(recvs, tag) if posted is None else posted  # receives first
        finish = at
        sent = []
        for tensor, peer in sends:
            works, done = self.post(tensor, peer, tag, at)
            sent.append(works)
            finish = max(finish, done)
        for t, peer, p in posted:
            finish = max(finish, self.arrival(t, peer, p))
        for work in sent:
            work.wait()
        return finish
