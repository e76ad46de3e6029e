"""ASTRA-sim's system layer, per NPU: chunks ("streams") through per-dimension queues.

Lines refer to astra-sim/astra-sim at commit 518bd513, ``astra-sim/system/Sys.cc``.
:class:`NpuSystem` is one NPU's ``Sys``: it cuts a collective into chunks
(``generate_collective``), gives each chunk its phases (one algorithm per dimension),
runs ``active-chunks-per-dimension`` of them at once in each dimension's queue and
moves a chunk on when its phase ends (``proceed_to_next_vnet_baseline``,
``SchedulerUnit``). It also keeps ASTRA-sim's own event buckets (one network event
per NPU per tick, ``try_register_event``/``call_events``), which decide the order of
same-time events, and charges the endpoint delay and the reduction's memory time
(``PacketBundle.cc``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from labsupport.runtime.astra import collectives as algo
from labsupport.runtime.astra.network import EventQueue, Network
from labsupport.runtime.astra.system import SystemConfig
from labsupport.runtime.astra.system import window as direct_window
from labsupport.topology.model import Topology


class _Stream:
    """One chunk on one NPU: its phases, priority and where it is (``StreamBaseline``)."""

    def __init__(self, sys: NpuSystem, sid: int, phases: deque, priority: int) -> None:
        self.sys, self.id, self.phases, self.priority = sys, sid, phases, priority
        self.phase = None
        self.queue = -1  # the dimension whose queue it is in (one queue per dimension)
        self.initialized = False

    def init(self) -> None:
        self.initialized = True
        self.started = self.sys.queue.now
        self.phase.alg.run(algo.INIT)

    def send(self, dst: int, nbytes: int) -> None:
        self.sys.net.send(self.sys.id, dst, self.id, nbytes)

    def recv(self, src: int, nbytes: int) -> None:
        self.sys.net.recv(src, self.sys.id, self.id, nbytes, self.received)

    def received(self) -> None:
        self.phase.alg.run(algo.RECEIVED)

    def general(self) -> None:
        self.phase.alg.run(algo.GENERAL)

    def bundle(self, processed: bool, nbytes: int) -> None:
        self.sys.bundle(self, processed, nbytes)

    def phase_done(self) -> None:
        self.sys.proceed(self)


@dataclass
class _Phase:
    queue: int  # = the logical dimension: one queue each (--num-queues-per-dim 1)
    alg: object


class NpuSystem:
    """One NPU's system layer (``Sys``): streams, queues, and its own event buckets."""

    def __init__(
        self,
        npu: int,
        topo: Topology,
        cfg: SystemConfig,
        kind: str,
        impls: list[str],
        queue: EventQueue,
        net: Network,
    ) -> None:
        self.id, self.topo, self.kind, self.impls = npu, topo, kind, impls
        self.queue, self.net = queue, net
        self.delay = int(cfg.get("endpoint-delay"))
        self.splits = int(cfg.get("preferred-dataset-splits"))
        # streams running at once per queue: ceil(active chunks / queues per dim), Sys.cc:229
        self.threshold = int(cfg.get("active-chunks-per-dimension"))
        self.policy = cfg.get("scheduling-policy")
        self.optimization = cfg.get("collective-optimization")
        self.cfg, self.local_mem_bw = cfg, 0.0  # bytes/s, read at the first reduction
        self.logical = logical_dims(topo, impls, npu)
        self.buckets: dict[int, list] = {}
        self.ready: list[_Stream] = []
        self.active = {q: [] for q in range(len(topo.dims))}
        self.running = dict.fromkeys(self.active, 0)
        self.priority = self.num_streams = 0
        self.total_streams = self.done_streams = 0
        self.finish: int | None = None
        self.intervals: dict[int, list] = {}
        self.dbt_turn = [0] * len(self.logical)

    # -- Sys::try_register_event / call_events: one network event per tick per NPU --------
    def register(self, delay: int, fn: Callable[..., object], *args: object) -> None:
        """Call ``fn(*args)`` ``delay`` ns from now (with the other events of that tick)."""
        when = self.queue.now + delay
        todo = self.buckets.get(when)
        if todo is None:
            todo = self.buckets[when] = []
            self.queue.at(when, self._call_events, when)
        todo.append((fn, args))

    def _call_events(self, when: int) -> None:
        todo, i = self.buckets[when], 0
        while i < len(todo):
            fn, args = todo[i]
            fn(*args)
            i += 1
        del self.buckets[when]

    def bundle(self, stream: _Stream, processed: bool, nbytes: int) -> None:
        """``PacketBundle``: endpoint delay, then the reduction's 2 reads + 1 write."""
        self.register(self.delay, self._handed_on, stream, processed, nbytes)

    def _handed_on(self, stream: _Stream, processed: bool, nbytes: int) -> None:
        if processed:
            if not self.local_mem_bw:
                self.local_mem_bw = float(self.cfg.get("local-mem-bw")) * 1000000000
            one = int(float(nbytes) / self.local_mem_bw * 1e9)
            self.register(3 * one, stream.general)
        else:
            stream.general()

    # -- Sys::generate_collective ----------------------------------------------------------
    def generate(self, size: int) -> None:
        """Split a collective of ``size`` bytes into streams (Sys::generate_collective)."""
        chunk = size // self.splits
        if self.kind != algo.AG and self.topo.npus > chunk:
            chunk, size = self.topo.npus, self.splits * self.topo.npus
        if chunk == 0:
            raise ValueError(
                f"{size} B in {self.splits} splits is 0 B per chunk: ASTRA-sim "
                "loops for ever (Sys.cc:1010, 759-763); send at least that many bytes"
            )
        # One priority for all the chunks of a collective (Sys.cc:680, get_priority).
        priority = self.priority if self.policy in ("LIFO", "FIFO") else 0
        self.priority += {"LIFO": 1, "FIFO": -1}.get(self.policy, 0)
        while size > 0:
            self.total_streams += 1
            size = 0 if chunk > size else size - chunk
            stream = _Stream(self, self.num_streams, deque(self._phases(chunk)), priority)
            self.num_streams += 1
            self._insert(self.ready, stream)
            while self.ready:  # Sys::schedule: every ready stream goes to its first queue
                self.proceed(self.ready[0])
                self.ready.pop(0)

    def _phases(self, data: int) -> list[_Phase]:
        dims = [d for d in range(len(self.logical)) if self.logical[d][1] > 1]
        if self.kind == algo.AG:
            dims = dims[::-1]
        if self.kind != algo.AR or self.optimization == "baseline":
            plan = [(self.kind, d, True) for d in dims]
        else:  # localBWAware: RS up, AR on the last, AG down (Sys.cc:836-939)
            plan = [(algo.RS, d, True) for d in dims[:-1]] + [(algo.AR, dims[-1], True)]
            plan += [(algo.AG, d, False) for d in dims[-2::-1]]
        out = []
        for kind, d, clockwise in plan:
            alg = self._algorithm(kind, d, data, clockwise)
            out.append(_Phase(d, alg))
            data = alg.final_data_size
        return out

    def _algorithm(self, kind: str, d: int, data: int, clockwise: bool):
        name, members = self.impls[d], self.logical[d][2]
        if name == "doubleBinaryTree":
            tree = algo.BinaryTree(members, root_max=self.dbt_turn[d] % 2 == 0)
            self.dbt_turn[d] += 1
            return algo.DoubleBinaryTree(self.id, tree, data)
        ring = algo.RingTopology(members, self.id)
        if name in ("ring", "oneRing"):
            return algo.Ring(kind, self.id, ring, data, clockwise)
        if name in ("halvingDoubling", "oneHalvingDoubling"):
            return algo.HalvingDoubling(kind, self.id, ring, data)
        return algo.Direct(kind, self.id, ring, data, clockwise, direct_window(name))

    # -- streams through queues (Sys::proceed_to_next_vnet_baseline, SchedulerUnit) --------
    def _insert(self, waiting: list, stream: _Stream) -> None:
        i = 0
        while i < len(waiting) and (
            waiting[i].initialized or waiting[i].priority >= stream.priority
        ):
            i += 1
        waiting.insert(i, stream)

    def proceed(self, stream: _Stream) -> None:
        """Move ``stream`` on to its next phase, or finish it."""
        previous = stream.queue
        if stream.phase is not None:
            self.intervals.setdefault(stream.queue, []).append((stream.started, self.queue.now))
            self.active[stream.queue].remove(stream)
        if not stream.phases:
            self.done_streams += 1
            if self.done_streams == self.total_streams:
                self.finish = self.queue.now  # the workload reports "sys[i] finished"
            self._removed(previous)
            return
        stream.phase = stream.phases.popleft()
        stream.queue = stream.phase.queue
        stream.initialized = False
        stream.phase.alg.attach(stream)
        self._insert(self.active[stream.queue], stream)
        if previous >= 0:
            self._removed(previous)
        self._start(stream.queue)

    def _removed(self, q: int) -> None:
        self.running[q] -= 1
        self._start(q)

    def _start(self, q: int) -> None:
        waiting, i = self.active[q], self.running[q]
        while i < len(waiting) and self.running[q] < self.threshold:
            waiting[i].init()
            self.running[q] += 1
            i += 1


def logical_dims(topo: Topology, impls: list[str], npu: int) -> list[tuple[str, int, list]]:
    """Per logical dimension: algorithm, NPUs and this NPU's group (GeneralComplexTopology.cc)."""
    out, stride = [], 1
    for d, name in enumerate(impls):
        if name.startswith("one"):
            out.append((name, topo.npus, list(range(topo.npus))))
            break
        n = topo.dims[d].npus
        base = npu - ((npu // stride) % n) * stride
        out.append((name, n, [base + k * stride for k in range(n)]))
        stride *= n
    for name, n, _ in out:
        if name in ("halvingDoubling", "oneHalvingDoubling", "doubleBinaryTree") and n & (n - 1):
            raise ValueError(
                f"ASTRA-sim's {name} needs a power-of-two number of NPUs, got {n}: "
                "it neither folds nor pads (HalvingDoubling.cc takes log2, "
                "BinaryTree.cc leaves NPUs out of the tree)"
            )
    return out
