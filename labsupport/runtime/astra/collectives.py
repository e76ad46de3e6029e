"""ASTRA-sim's native collective algorithms, packet for packet, as its system layer runs them.

Each class is one collective phase on one NPU, a small state machine driven by three
events: the phase starts (``INIT``), a packet the NPU posted a receive for arrives
(``RECEIVED``), and the NPU finished handling a packet locally (``GENERAL``: the
endpoint delay, plus the reduction's memory time when the packet was reduced; see
:mod:`labsupport.runtime.astra.mode`). Lines refer to astra-sim/astra-sim at commit
518bd513, ``astra-sim/system/astraccl/native_collectives/``.

- :class:`Ring` (``collective_algorithm/Ring.cc``): one neighbour; all-reduce is
  2(n-1) sends of size/n, each after the previous packet was received and handled;
  the first n-1 received are reduced (``toggle``), the rest are not.
- :class:`Direct` (``AllToAll.cc``, ASTRA-sim's "direct"): sends to all n-1 peers at
  once (or ``window`` at a time); an all-reduce sends its all-gather half only once
  all n-1 reduce-scatter packets arrived (``AllToAll::run``).
- :class:`HalvingDoubling` (``HalvingDoubling.cc``): partner at distance 1 first with
  size/2, distance doubling and size halving, then back; only log2(n) - 1 of the
  received packets are reduced, and the reduction is charged on the size of the
  *next* message (``release_packets`` runs before ``msg_size`` halves).
- :class:`DoubleBinaryTree` (``DoubleBinaryTreeAllReduce.cc``): a whole chunk goes up
  one binary tree to its root and back down; consecutive chunks alternate between a
  tree rooted at the highest and one at the lowest index (``DoubleBinaryTreeTopology
  ::get_topology``). It is always an all-reduce of the whole chunk, whatever phase it
  is asked for. This is not NCCL's double binary tree, which splits every chunk
  between two trees so that each rank is a leaf in one of them.
"""

from __future__ import annotations

from collections import deque
from math import log2

INIT, GENERAL, RECEIVED = "init", "general", "received"
AR, AG, RS, A2A = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"


class RingTopology:
    """The NPUs of one logical dimension in ring order (``logical_topology/RingTopology.cc``)."""

    def __init__(self, members: list[int], npu: int) -> None:
        self.members, self.n = members, len(members)
        self.index = {m: i for i, m in enumerate(members)}
        self.position = self.index[npu]

    def receiver(self, npu: int, clockwise: bool) -> int:
        return self.members[(self.index[npu] + (1 if clockwise else -1)) % self.n]

    def sender(self, npu: int, clockwise: bool) -> int:
        return self.members[(self.index[npu] + (-1 if clockwise else 1)) % self.n]


class BinaryTree:
    """ASTRA-sim's tree over ``members`` (``logical_topology/BinaryTree.cc``).

    A full binary tree hangs under the root, ids given in in-order, so the root gets the
    highest id (``root_max``) or the lowest.
    """

    def __init__(self, members: list[int], root_max: bool) -> None:
        self.parent: dict[int, int] = {}
        self.children: dict[int, list[int]] = {}
        ids = iter(members)
        depth = len(members).bit_length()  # 1 + floor(log2 n)

        def build(levels: int) -> int:  # a full subtree, ids in in-order
            if levels <= 1:
                node = next(ids)
                self.children[node] = []
                return node
            left = build(levels - 1)
            node = next(ids)
            right = build(levels - 1)
            self.children[node] = [left, right]
            self.parent[left] = self.parent[right] = node
            return node

        if root_max:
            child = build(depth - 1)
            self.root = next(ids)
        else:
            self.root = next(ids)
            child = build(depth - 1)
        self.children[self.root] = [child]
        self.parent[child] = self.root


class _Phase:
    """What every algorithm shares: its stream, the bytes in and out, and how to talk."""

    data_size: int
    final_data_size: int

    def attach(self, stream) -> None:  # noqa: ANN001 - an astra_mode.Stream
        self.stream = stream

    def _send(self, dst: int, nbytes: int) -> None:
        self.stream.send(dst, nbytes)

    def _recv(self, src: int, nbytes: int) -> None:
        self.stream.recv(src, nbytes)

    def _bundle(self, processed: bool, nbytes: int) -> None:
        self.stream.bundle(processed, nbytes)

    def _exit(self) -> None:
        self.stream.phase_done()


class Ring(_Phase):
    """ASTRA-sim's ring (``Ring.cc``); also the base of :class:`Direct`."""

    def __init__(self, kind: str, npu: int, topo: RingTopology, data_size: int, clockwise: bool):
        n = topo.n
        self.kind, self.id, self.topo, self.clockwise, self.n = kind, npu, topo, clockwise, n
        self.data_size = data_size
        self.receiver, self.sender = topo.receiver(npu, clockwise), topo.sender(npu, clockwise)
        self.parallel = 1
        self.to_send = {AR: 2 * (n - 1), A2A: (n - 1) * n // 2}.get(kind, n - 1)
        self.final_data_size = {AG: data_size * n, RS: data_size // n}.get(kind, data_size)
        self.msg_size = data_size if kind == AG else data_size // n
        self.free = self.zero = self.nonzero = self.received = 0
        self.toggle = False
        self.packets: deque = deque()

    def nonzero_packets(self) -> int:
        return (self.n - 1) * self.parallel

    def run(self, event: str) -> None:
        if event == GENERAL:
            self.free += 1
            self.ready()
            self.iteratable()
        elif event == RECEIVED:
            self.received += 1
            self.insert_packet()
        else:
            for _ in range(self.parallel):
                self.insert_packet()

    def insert_packet(self) -> None:
        if self.zero == 0 and self.nonzero == 0:
            self.zero, self.nonzero = self.parallel, self.nonzero_packets()
            self.toggle = not self.toggle
        self.packets.append((self.sender, self.receiver, self.msg_size))
        if self.zero > 0:  # a packet of this NPU's own data: no reduction
            self.zero -= 1
            processed = False
        else:  # a packet that came in: reduced in reduce-scatter, and in all-reduce's 1st half
            self.nonzero -= 1
            processed = self.kind == RS or (self.kind == AR and self.toggle)
        self.release(processed)

    def release(self, processed: bool) -> None:
        self._bundle(processed, self.msg_size)

    def ready(self) -> bool:
        if not self.packets or self.to_send == 0 or self.free == 0:
            return False
        src, dst, size = self.packets.popleft()
        self._send(dst, size)
        self._recv(src, size)
        self.to_send -= 1
        self.free -= 1
        return True

    def iteratable(self) -> bool:
        if self.to_send == 0 and self.free == self.parallel:
            self._exit()
            return False
        return True


class Direct(Ring):
    """ASTRA-sim's "direct" (``AllToAll.cc``): every peer at once, ``window`` at a time."""

    def __init__(
        self,
        kind: str,
        npu: int,
        topo: RingTopology,
        data_size: int,
        clockwise: bool,
        window: int = -1,
    ):
        super().__init__(kind, npu, topo, data_size, clockwise)
        self.middle = self.n - 1
        self.parallel = self.n - 1 if window == -1 else min(window, self.n - 1)
        if kind == A2A:
            self.to_send = self.n - 1

    def nonzero_packets(self) -> int:
        return self.parallel  # AllToAll::get_non_zero_latency_packets, dimension "NA"

    def run(self, event: str) -> None:
        if event == GENERAL and self.kind == AR and self.to_send <= self.middle:
            self.free += 1
            if self.received < self.middle:  # all-gather waits for every reduce-scatter packet
                return
            for _ in range(self.parallel):
                if not self.ready():  # nothing changed, so the remaining calls would not send
                    break
            self.iteratable()
        else:
            super().run(event)

    def release(self, processed: bool) -> None:
        super().release(processed)
        topo, cw = self.topo, self.clockwise
        self.receiver = topo.receiver(self.receiver, cw)
        if self.receiver == self.id:
            self.receiver = topo.receiver(self.receiver, cw)
        self.sender = topo.sender(self.sender, cw)
        if self.sender == self.id:
            self.sender = topo.sender(self.sender, cw)


class HalvingDoubling(Ring):
    """ASTRA-sim's recursive halving-doubling (``HalvingDoubling.cc``); n a power of two."""

    def __init__(self, kind: str, npu: int, topo: RingTopology, data_size: int):
        super().__init__(kind, npu, topo, data_size, True)
        if kind == A2A:
            raise ValueError("ASTRA-sim's halvingDoubling has no all-to-all (HalvingDoubling.cc)")
        steps = int(log2(self.n))
        self.to_send = 2 * steps if kind == AR else steps
        self.final_data_size = {AG: data_size * self.n, RS: data_size // self.n}.get(
            kind, data_size
        )
        self.msg_size = data_size if kind == AG else data_size // 2
        self.offset, self.multiplier = (self.n // 2, 0.5) if kind == AG else (1, 2.0)
        self._aim()

    def _aim(self) -> None:
        """Partner ``offset`` places away, forwards or back by the position's parity."""
        forward = self.offset == 0 or (self.topo.position // self.offset) % 2 == 0
        partner = self.id
        for _ in range(self.offset):
            partner = self.topo.receiver(partner, forward)
        self.receiver = self.sender = partner

    def nonzero_packets(self) -> int:
        return int(log2(self.n) - 1 * self.parallel)

    def release(self, processed: bool) -> None:
        super().release(processed)
        self.offset = int(self.offset * self.multiplier)
        self.msg_size = int(self.msg_size / self.multiplier)
        if self.offset == self.n and self.kind == AR:  # turn round: doubling back
            self.multiplier = 0.5
            self.offset = int(self.offset * self.multiplier)
            self.msg_size = int(self.msg_size / self.multiplier)
        self._aim()


class DoubleBinaryTree(_Phase):
    """ASTRA-sim's ``doubleBinaryTree``: a whole chunk up one tree and back down."""

    def __init__(self, npu: int, tree: BinaryTree, data_size: int):
        self.id, self.data_size, self.final_data_size = npu, data_size, data_size
        self.parent = tree.parent.get(npu, -1)
        self.children = tree.children[npu]
        self.type = "root" if npu == tree.root else "leaf" if not self.children else "inner"
        self.state, self.reductions = "begin", 0

    def run(self, event: str) -> None:  # the branches of DoubleBinaryTreeAllReduce::run, in order
        s, t, size = self.state, self.type, self.data_size
        if t == "leaf":
            if s == "begin":
                self._bundle(False, size)
                self.state = "to_parent"
            elif s == "to_parent":
                self._send(self.parent, size)
                self._recv(self.parent, size)
                self.state = "from_parent"
            elif s == "from_parent":
                self._bundle(False, size)
                self.state = "end"
            elif s == "end":
                self._exit()
        elif t == "inner":
            if s == "begin":
                self.state = "wait_two"
                for child in self.children:
                    self._recv(child, size)
            elif s == "wait_two" and event == RECEIVED:
                self._bundle(True, size)
                self.state = "wait_one"
            elif s == "wait_one" and event == RECEIVED:
                self._bundle(True, size)
                self.state = "to_parent"
            elif self.reductions < 1 and event == GENERAL:
                self.reductions += 1  # the first reduction done: wait for the second
            elif s == "to_parent":
                self.state = "from_parent"
                self._send(self.parent, size)
                self._recv(self.parent, size)
            elif s == "from_parent" and event == RECEIVED:
                self._bundle(True, size)  # ASTRA-sim charges a reduction here too
                self.state = "to_children"
            elif s == "to_children":
                for child in self.children:
                    self._send(child, size)
                self._exit()
        elif s == "begin":  # the root has one child
            self.state = "wait_one"
            self._recv(self.children[0], size)
        elif s == "wait_one":
            self._bundle(True, size)
            self.state = "to_children"
        elif s == "to_children":
            self._send(self.children[0], size)
            self._exit()
