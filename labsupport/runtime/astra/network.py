"""ASTRA-sim's analytical network backends, event for event: a clock, send/recv matching, links.

Line references are to astra-sim/astra-sim at commit 518bd513 (``astra-sim/...``) and
to its analytical backend, astra-sim/astra-network-analytical (``analytical/...``).

- **Clock** (:class:`EventQueue`): integer nanoseconds; events at one time run in the
  order they were scheduled, including those scheduled during that time
  (``analytical/common/event-queue/EventQueue.cpp``, ``EventList.cpp``).
- **Matching** (:class:`Network`): a send and a receive meet by (tag, src, dst, bytes)
  and the how-many-th such message it is (``network_frontend/analytical/common/
  ChunkIdGenerator.cc``, ``CallbackTracker.cc``). A message that arrives before its
  receive is posted waits; a receive posted after arrival runs at once
  (``CommonNetworkApi.cc``, ``process_chunk_arrival`` and ``sim_recv``).
- **Congestion-unaware** (``congestion_aware=False``): every message costs
  ``int(hops * latency + bytes / bandwidth)`` in the *first dimension whose
  coordinate differs*, whatever else is in flight
  (``congestion_unaware/multi-dim-topology/MultiDimTopology.cpp``, ``send`` and
  ``get_dim_to_transfer``; ``basic-topology/BasicTopology.cpp``,
  ``compute_communication_delay``). A message across two dimensions pays one.
- **Congestion-aware** (1-D only, as the backend refuses more: ``congestion_aware/
  topology/Helper.cpp``): each directed link sends one message at a time, first come
  first served; a message is stored and forwarded at each hop, arriving
  ``int(latency + bytes / bandwidth)`` after it starts, the link free again after
  ``int(bytes / bandwidth)`` (``congestion_aware/network/Link.cpp``). A Switch
  message therefore pays 2 x (latency + bytes / bandwidth).

Bandwidth is GB/s with GB = 2**30 bytes (``common/NetworkFunction.cpp``, ``bw_GBps_to_Bpns``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

import numpy as np

from labsupport.topology.model import Topology


class EventQueue:
    """Integer-nanosecond clock: ``at(t, fn, *args)``; same-time events run in FIFO order."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list = []
        self._seq = 0

    def at(self, time: int, fn: Callable, *args: object) -> None:
        """Call ``fn(*args)`` at ``time`` (ns)."""
        heapq.heappush(self._heap, (time, self._seq, fn, args))
        self._seq += 1

    def run(self) -> None:
        """Run the events in time order until none is left."""
        while self._heap:
            self.now, _, fn, args = heapq.heappop(self._heap)
            fn(*args)


def bytes_per_ns(gb_per_s: float) -> float:
    """ASTRA-sim's ``bw_GBps_to_Bpns``: GB/s (2**30 B) to bytes per ns, same float steps."""
    return gb_per_s * (1 << 30) / 1_000_000_000


class Network:
    """Sends, receives and their matching over one of the two backends.

    ``sent`` lists every message as (src, dst, bytes) for the breakdown.
    """

    def __init__(self, topo: Topology, queue: EventQueue, congestion_aware: bool) -> None:
        if congestion_aware and len(topo.dims) != 1:
            raise ValueError(
                "ASTRA-sim's congestion-aware backend runs 1-dimensional networks only "
                f"(analytical congestion_aware/topology/Helper.cpp); {topo.name} has "
                f"{len(topo.dims)}: use the congestion-unaware mode"
            )
        self.topo, self.queue, self.aware = topo, queue, congestion_aware
        self.coords = [tuple(int(c) for c in a) for a in topo.address(np.arange(topo.npus))]
        self.bpns = [bytes_per_ns(d.bandwidth) for d in topo.dims]
        self.send_ids: dict = {}
        self.recv_ids: dict = {}
        self.entries: dict = {}  # (tag, src, dst, bytes, n) -> [receive callback, arrived]
        self.sent: list[tuple[int, int, int]] = []
        if congestion_aware:
            self.links: dict[tuple[int, int], _Link] = {}

    # -- matching (CommonNetworkApi.cc) ---------------------------------------------------
    def send(self, src: int, dst: int, tag: int, nbytes: int) -> None:
        """``sim_send``: the message leaves now; the sender is not told when it lands."""
        key = (tag, src, dst, nbytes)
        n = self.send_ids[key] = self.send_ids.get(key, -1) + 1
        self.entries.setdefault((*key, n), [None, False])
        if nbytes < 1:
            raise ValueError(
                "a message of 0 bytes: ASTRA-sim aborts on it (ChunkIdGenerator.cc "
                "asserts chunk_size > 0); give the collective more bytes"
            )
        self.sent.append((src, dst, nbytes))
        if self.aware:
            self._link(src, self._route(src, dst), nbytes, (*key, n))
        else:
            dim, link_delay = self._first_dim(src, dst)
            delay = int(link_delay + nbytes / self.bpns[dim])
            self.queue.at(self.queue.now + delay, self._arrived, (*key, n))

    def recv(self, src: int, dst: int, tag: int, nbytes: int, callback: Callable) -> None:
        """``sim_recv``: run ``callback`` when the matching message has arrived."""
        key = (tag, src, dst, nbytes)
        n = self.recv_ids[key] = self.recv_ids.get(key, -1) + 1
        entry = self.entries.get((*key, n))
        if entry is None:
            self.entries[(*key, n)] = [callback, False]
        elif entry[1]:  # already here: run it now, after what is already due now
            del self.entries[(*key, n)]
            self.queue.at(self.queue.now, callback)
        else:
            entry[0] = callback

    def _arrived(self, key: tuple) -> None:
        entry = self.entries[key]
        if entry[0] is not None:
            del self.entries[key]
            entry[0]()
        else:
            entry[1] = True

    # -- where a message goes --------------------------------------------------------------
    def _first_dim(self, src: int, dst: int) -> tuple[int, float]:
        """``get_dim_to_transfer`` (the first dimension that differs) and its hops x latency."""
        a, b = self.coords[src], self.coords[dst]
        dim = next((k for k, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)
        if dim is None:
            raise ValueError(f"NPU {src} sends to itself")
        x, y, d = a[dim], b[dim], self.topo.dims[dim]
        if d.kind == "FullyConnected":
            hops = 1
        elif d.kind == "Switch":
            hops = 2
        else:
            clockwise = (y - x) % d.npus
            hops = min(clockwise, d.npus - clockwise)
        return dim, hops * d.latency

    def _route(self, src: int, dst: int) -> list[int]:
        """Devices a message visits in the 1-D aware backend (``basic-topology/*.cpp``, route)."""
        d = self.topo.dims[0]
        n = d.npus
        if d.kind == "FullyConnected":
            return [src, dst]
        if d.kind == "Switch":
            return [src, n, dst]  # the switch is device n
        clockwise = (dst - src) % n
        step = -1 if n - clockwise < clockwise else 1  # a tie goes clockwise
        route = [src]
        while route[-1] != dst:
            route.append((route[-1] + step) % n)
        return route

    # -- congestion-aware links (Link.cpp) -------------------------------------------------
    def _link(self, at: int, route: list[int], nbytes: int, key: tuple) -> None:
        link = self.links.setdefault((route[0], route[1]), _Link(route[0], route[1]))
        link.pending.append((route, nbytes, key))
        if not link.busy:
            self._transmit(link)

    def _transmit(self, link: _Link) -> None:
        route, nbytes, key = link.pending.popleft()
        link.busy = True
        d = self.topo.dims[0]
        serialization = nbytes / self.bpns[0]
        link.bytes += nbytes
        now = self.queue.now
        self.queue.at(now + int(d.latency + serialization), self._hop, route[1:], nbytes, key)
        self.queue.at(now + int(serialization), self._free, link)

    def _hop(self, route: list[int], nbytes: int, key: tuple) -> None:
        if len(route) == 1:
            self._arrived(key)
        else:
            self._link(route[0], route, nbytes, key)

    def _free(self, link: _Link) -> None:
        link.busy = False
        if link.pending:
            self._transmit(link)


class _Link:
    """One directed link of the aware backend: busy or not, and who waits for it."""

    __slots__ = ("src", "dst", "busy", "pending", "bytes")

    def __init__(self, src: int, dst: int) -> None:
        self.src, self.dst, self.busy, self.pending, self.bytes = src, dst, False, deque(), 0
