"""The ASTRA-sim-compatible mode: ASTRA-sim's times for ASTRA-sim's inputs.

::

    from labsupport import topology
    from labsupport.runtime import astra
    res = astra.simulate_astra("network.yml", "system.json", "all_reduce", 2**26)
    res.finish_ns            # each NPU's "sys[i] finished, N cycles", in ns
    print(res.report())      # those lines, then time per dimension and the busiest link

This mode reproduces ASTRA-sim's system layer (astra-sim/astra-sim at commit 518bd513,
``astra-sim/system/Sys.cc`` and friends; :mod:`~labsupport.runtime.astra.streams`) over
its analytical network backends (:mod:`~labsupport.runtime.astra.network`) with its
own algorithms (:mod:`~labsupport.runtime.astra.collectives`). On the 400-odd cases of
tests/data/astra every NPU's finish time equals ASTRA-sim's to the nanosecond.

- The collective is cut into ``preferred-dataset-splits`` chunks of ``size //
  splits`` bytes, at least one byte per NPU (``Sys::determine_chunk_size``,
  Sys.cc:1009-1019); every chunk is a *stream* of phases, one per dimension
  (``baseline``), or reduce-scatter up the dimensions, all-reduce on the last and
  all-gather back down (``localBWAware``; Sys.cc:768-939). A dimension of one NPU is
  skipped. Only as many dimensions as the system config lists algorithms take part
  (``GeneralComplexTopology.cc``); a ``one*`` algorithm makes one ring of all NPUs.
- Each dimension has one queue (``--num-queues-per-dim`` 1, the binary's default);
  ``active-chunks-per-dimension`` streams run in it at once, the others wait in the
  order they were made: all chunks of a collective share one priority (Sys.cc:680), so
  ``scheduling-policy`` orders collectives, not the chunks of one.
- An NPU hands every packet on after ``endpoint-delay`` ns, and a reduced packet also
  costs ``3 x bytes / local-mem-bw`` (``PacketBundle::call``, two reads and a write).

Where it differs from the course's own :func:`~labsupport.topology.simulate_on_topology`: that one
runs one schedule step after step with no system layer, charges a message every
dimension it crosses, and in its congestion mode lets a message cut through within a
dimension (one latency per hop, the bytes once per dimension: stored and forwarded at
the NPU between dimensions); ASTRA-sim charges only the first dimension that differs
and, congestion-aware, stores and forwards at every hop.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike

import numpy as np

from labsupport.runtime.astra.files import from_astra_sim
from labsupport.runtime.astra.network import EventQueue, Network
from labsupport.runtime.astra.streams import NpuSystem
from labsupport.runtime.astra.system import SystemConfig, collective_name, from_astra_system
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
    note: str = ""

    @property
    def time(self) -> float:
        """Seconds until the last NPU finished."""
        return float(self.finish_ns.max()) * 1e-9

    def report(self) -> str:
        """ASTRA-sim's ``sys[i] finished`` lines, then the course's breakdown."""
        lines = [f"sys[{i}] finished, {int(t)} cycles" for i, t in enumerate(self.finish_ns)]
        lines.append(
            f"{self.collective} of {self.nbytes} B on {self.topo.name}: "
            f"{self.time * 1e6:.3f} us (congestion-"
            f"{'aware' if self.congestion_aware else 'unaware'})"
        )
        for name, busy in zip(self.dim_names, self.dim_busy_ns, strict=True):
            lines.append(f"  {name}: a phase running for {busy / 1e3:.3f} us")
        links, npus = self.topo.links(), self.topo.npus
        i = int(np.argmax(self.link_busy))
        ends = [
            f"NPU {v}" if v < npus else f"switch {v - npus}" for v in (links.src[i], links.dst[i])
        ]
        lines.append(
            f"  busiest link: {ends[0]} -> {ends[1]} (dim {links.dim[i]}), "
            f"busy {self.link_busy[i] * 1e6:.3f} us"
        )
        if self.note:
            lines.append(f"  note: {self.note}")
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
        raise ValueError(
            f"{cfg.source} lists {len(impls)} algorithms for {kind} but "
            f"{topo.name} has {len(topo.dims)} dimensions "
            "(GeneralComplexTopology.cc asserts at most one per dimension)"
        )
    if len(impls) > 4:
        raise ValueError(
            "ASTRA-sim marks 4 dimensions as involved (Workload.cc:332): "
            "at most 4 algorithms per collective"
        )
    if any(d.npus < 2 for d in topo.dims):
        raise ValueError(
            f"{topo.name} has a dimension of 1 NPU, which ASTRA-sim refuses "
            "(npus_count should be larger than 1): drop that dimension"
        )
    queue = EventQueue()
    net = Network(topo, queue, congestion_aware)
    systems = [NpuSystem(i, topo, cfg, kind, impls, queue, net) for i in range(topo.npus)]
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
    note = ""
    if len(impls) < len(topo.dims) and not any(a.startswith("one") for a in impls):
        note = (
            f"only the first {len(impls)} of {len(topo.dims)} dimensions take part: the system "
            f"config lists {len(impls)} algorithm(s) for {kind}, and ASTRA-sim runs no more "
            "(GeneralComplexTopology.cc)"
        )
    link_busy = _link_busy(topo, net)
    return AstraResult(
        kind, int(nbytes), finish, busy, names, link_busy, topo, congestion_aware, note
    )


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
    return np.bincount(
        r.link, weights=sent[r.msg, 2] / links.bytes_per_s[r.link], minlength=len(links)
    )
