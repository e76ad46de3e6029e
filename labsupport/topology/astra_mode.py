"""The ASTRA-sim-compatible mode: ASTRA-sim's times for ASTRA-sim's inputs.

::

    from labsupport import topology
    res = topology.simulate_astra("network.yml", "system.json", "all_reduce", 2**26)
    res.finish_ns            # each NPU's "sys[i] finished, N cycles", in ns
    print(res.report())      # those lines, then time per dimension and the busiest link

This mode reproduces ASTRA-sim's system layer (astra-sim/astra-sim at commit 518bd513,
``astra-sim/system/Sys.cc`` and friends) over its analytical network backends
(:mod:`~labsupport.topology.astra_network`) with its own algorithms
(:mod:`~labsupport.topology.astra_collectives`):

- The collective is cut into ``preferred-dataset-splits`` chunks of ``size //
  splits`` bytes, at least one byte per NPU (``Sys::determine_chunk_size``,
  Sys.cc:1009-1019); every chunk is a *stream* of phases, one per dimension
  (``baseline``), or reduce-scatter up the dimensions, all-reduce on the last and
  all-gather back down (``localBWAware``; Sys.cc:770-968). A dimension of one NPU is
  skipped. Only as many dimensions as the system config lists algorithms take part
  (``GeneralComplexTopology.cc``); a ``one*`` algorithm makes one ring of all NPUs.
- Each dimension has one queue (``--num-queues-per-dim`` 1, the binary's default);
  ``active-chunks-per-dimension`` streams run in it at once, the others wait in
  priority order (``scheduling-policy``; ``Sys::insert_stream``).
- An NPU hands every packet on after ``endpoint-delay`` ns, and a reduced packet also
  costs ``3 x bytes / local-mem-bw`` (``PacketBundle::call``, two reads and a write).

Where it differs from the course's own :func:`~labsupport.topology.simulate`: that one
runs one schedule step after step with no system layer, charges a message every
dimension it crosses, and in its congestion mode lets a message cut through (one
latency per hop, the bytes once); ASTRA-sim charges only the first dimension that
differs and, congestion-aware, stores and forwards at every hop.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from math import ceil, log2
from os import PathLike

import numpy as np

from labsupport.topology import astra_collectives as algo
from labsupport.topology.astra import from_astra_sim
from labsupport.topology.astra_network import EventQueue, Network
from labsupport.topology.astra_system import SystemConfig, collective_name, from_astra_system
from labsupport.topology.astra_system import window as direct_window
from labsupport.topology.model import Topology
from labsupport.topology.routing import route


@dataclass(frozen=True)
class AstraResult:
    """What :func:`simulate_astra` found; times in ns as ASTRA-sim prints them."""

    collective: str
    nbytes: int
    finish_ns: np.ndarray  # per NPU
    dim_busy_ns: np.ndarray  # per logical dimension: time the slowest NPU had a phase running
    dim_names: tuple[str, ...]
    link_busy: np.ndarray  # seconds per link of topo.links()
    topo: Topology
    congestion_aware: bool

    @property
    def time(self) -> float:
        """Seconds until the last NPU finished."""
        return float(self.finish_ns.max()) * 1e-9

    def report(self) -> str:
        """ASTRA-sim's ``sys[i] finished`` lines, then the course's breakdown."""
        lines = [f"sys[{i}] finished, {int(t)} cycles" for i, t in enumerate(self.finish_ns)]
        lines.append(f"{self.collective} of {self.nbytes} B on {self.topo.name}: "
                     f"{self.time * 1e6:.3f} us (congestion-"
                     f"{'aware' if self.congestion_aware else 'unaware'})")  # fmt: skip
        for name, busy in zip(self.dim_names, self.dim_busy_ns, strict=True):
            lines.append(f"  {name}: a phase running for {busy / 1e3:.3f} us")
        links = self.topo.links()
        i = int(np.argmax(self.link_busy))
        lines.append(f"  busiest link: {links.src[i]} -> {links.dst[i]} (dim {links.dim[i]}), "
                     f"busy {self.link_busy[i] * 1e6:.3f} us")  # fmt: skip
        return "\n".join(lines)


def simulate_astra(
    network: Topology | str | PathLike | dict,
    system: SystemConfig | str | PathLike | dict,
    collective: str,
    nbytes: int,
    congestion_aware: bool = False,
) -> AstraResult:
    """Run ``collective`` of ``nbytes`` per NPU as ASTRA-sim's analytical backend would."""
    topo = network if isinstance(network, Topology) else from_astra_sim(network)
    cfg = system if isinstance(system, SystemConfig) else from_astra_system(system)
    kind = collective_name(collective)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer) or nbytes < 1:
        raise ValueError(f"nbytes must be a whole number of bytes >= 1, got {nbytes!r}")
    impls = cfg.implementations(kind)
    if len(impls) > len(topo.dims):
        raise ValueError(f"{cfg.source} lists {len(impls)} algorithms for {kind} but "
                         f"{topo.name} has {len(topo.dims)} dimensions "
                         "(GeneralComplexTopology.cc asserts at most one per dimension)")  # fmt: skip
    if len(impls) > 4:
        raise ValueError("ASTRA-sim marks 4 dimensions as involved (Workload.cc:332): "
                         "at most 4 algorithms per collective")  # fmt: skip
    if any(d.npus < 2 for d in topo.dims):
        raise ValueError(f"{topo.name} has a dimension of 1 NPU, which ASTRA-sim refuses "
                         "(npus_count should be larger than 1): drop that dimension")  # fmt: skip
    queue = EventQueue()
    net = Network(topo, queue, congestion_aware)
    systems = [_Sys(i, topo, cfg, kind, impls, queue, net) for i in range(topo.npus)]
    for s in systems:  # every workload fires at t = 0, in NPU order (main.cc)
        s.generate(int(nbytes))
    queue.run()
    stuck = [s.id for s in systems if s.finish is None]
    if stuck:
        raise RuntimeError(f"NPUs {stuck[:8]} never finished: ASTRA-sim hangs on this input too")
    finish = np.array([s.finish for s in systems], dtype=np.int64)
    slowest = systems[int(np.argmax(finish))]
    names = tuple(_dim_name(topo, impls, d) for d in range(len(systems[0].logical)))
    busy = np.array([_union(slowest.intervals.get(d, [])) for d in range(len(names))])
    return AstraResult(kind, int(nbytes), finish, busy, names, _link_busy(topo, net),
                       topo, congestion_aware)  # fmt: skip


class _Stream:
    """One chunk on one NPU: its phases, priority and where it is (``StreamBaseline``)."""

    def __init__(self, sys: _Sys, sid: int, phases: deque, priority: int) -> None:
        self.sys, self.id, self.phases, self.priority = sys, sid, phases, priority
        self.phase = None
        self.queue = -1
        self.steps_finished = 0
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
    queue: int
    dim: int
    alg: object


class _Sys:
    """One NPU's system layer (``Sys``): streams, queues, and its own event buckets."""

    def __init__(self, npu: int, topo: Topology, cfg: SystemConfig, kind: str, impls: list[str],
                 queue: EventQueue, net: Network) -> None:  # fmt: skip
        self.id, self.topo, self.kind, self.impls = npu, topo, kind, impls
        self.queue, self.net = queue, net
        self.delay = int(cfg.get("endpoint-delay"))
        self.splits = int(cfg.get("preferred-dataset-splits"))
        self.threshold = int(cfg.get("active-chunks-per-dimension"))  # ceil(chunks / 1 queue)
        self.policy = cfg.get("scheduling-policy")
        self.optimization = cfg.get("collective-optimization")
        self.cfg, self.local_mem_bw = cfg, 0.0  # bytes/s, read at the first reduction
        self.logical = _logical_dims(topo, impls, npu)
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
    def register(self, delay: int, fn, *args: object) -> None:  # noqa: ANN001
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
        chunk = size // self.splits
        if self.kind != algo.AG and self.topo.npus > chunk:
            chunk, size = self.topo.npus, self.splits * self.topo.npus
        if chunk == 0:
            raise ValueError(f"{size} B in {self.splits} splits is 0 B per chunk: ASTRA-sim "
                             "loops for ever (Sys.cc:1010, 759-763); send at least that many bytes")  # fmt: skip
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
        else:  # localBWAware: RS up, AR on the last, AG down (Sys.cc:872-968)
            plan = [(algo.RS, d, True) for d in dims[:-1]] + [(algo.AR, dims[-1], True)]
            plan += [(algo.AG, d, False) for d in dims[-2::-1]]
        out = []
        for kind, d, clockwise in plan:
            alg = self._algorithm(kind, d, data, clockwise)
            out.append(_Phase(d, d, alg))
            data = alg.final_data_size
        return out

    def _algorithm(self, kind: str, d: int, data: int, clockwise: bool):  # noqa: ANN202
        name, members = self.impls[d], self.logical[d][2]
        if name == "doubleBinaryTree":
            tree = algo.BinaryTree(members, root_max=self.dbt_turn[d] % 2 == 0)
            self.dbt_turn[d] += 1
            return algo.DoubleBinaryTree(self.id, tree, data)
        ring = algo.RingTopology(members, self.id)
        if name in ("ring", "oneRing"):
            return algo.Ring(kind, self.id, ring, data, clockwise)
        if "alvingDoubling" in name:
            return algo.HalvingDoubling(kind, self.id, ring, data)
        return algo.Direct(kind, self.id, ring, data, clockwise, direct_window(name))

    # -- streams through queues (Sys::proceed_to_next_vnet_baseline, SchedulerUnit) --------
    def _insert(self, waiting: list, stream: _Stream) -> None:
        i = 0
        while i < len(waiting) and (waiting[i].initialized or waiting[i].priority >= stream.priority):
            i += 1
        waiting.insert(i, stream)

    def proceed(self, stream: _Stream) -> None:
        previous = stream.queue
        if stream.phase is not None:
            self.intervals.setdefault(stream.phase.dim, []).append(
                (stream.started, self.queue.now))
            self.active[stream.queue].remove(stream)
        if not stream.phases:
            self.done_streams += 1
            if self.done_streams == self.total_streams:
                self.finish = self.queue.now  # the workload reports "sys[i] finished"
            self._removed(previous)
            return
        stream.steps_finished += 1
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


def _logical_dims(topo: Topology, impls: list[str], npu: int) -> list[tuple[str, int, list]]:
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
        if ("alvingDoubling" in name or name == "doubleBinaryTree") and n & (n - 1):
            raise ValueError(f"ASTRA-sim's {name} needs a power-of-two number of NPUs, got {n}: "
                             "it neither folds nor pads (HalvingDoubling.cc takes log2, "
                             "BinaryTree.cc leaves NPUs out of the tree)")  # fmt: skip
    return out


def _dim_name(topo: Topology, impls: list[str], d: int) -> str:
    name = impls[d]
    if name.startswith("one"):
        return f"all {topo.npus} NPUs ({name})"
    dim = topo.dims[d]
    return f"dim {d} ({dim.kind} of {dim.npus}, {name})"


def _union(spans: list[tuple[int, int]]) -> float:
    total, end = 0, -1
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return float(total)


def _link_busy(topo: Topology, net: Network) -> np.ndarray:
    """Seconds each link carries bytes: messages routed dimension by dimension."""
    links = topo.links()
    if not net.sent:
        return np.zeros(len(links))
    sent = np.array(net.sent, dtype=np.int64)
    r = route(topo, sent[:, 0], sent[:, 1])
    return np.bincount(r.link, weights=sent[r.msg, 2] / links.bytes_per_s[r.link],
                       minlength=len(links))  # fmt: skip


__all__ = ["AstraResult", "simulate_astra", "ceil", "log2"]
