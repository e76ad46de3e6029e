"""Run a schedule on a topology, on paper: how long each step takes and how busy each link is.

Start at :func:`simulate_on_topology`; the rules are in the comments of it and of ``_step``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labsupport.schedules import Schedule, Step
from labsupport.topology.model import Links, Topology
from labsupport.topology.routing import Route, route


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate_on_topology` found: ``time`` (s), ``per_step`` (s), ``link_busy``.

    ``link_busy[i]`` is how long (s) link i (see ``links``, same order as
    ``Topology.links()``) spends carrying bytes over the whole schedule.
    """

    name: str
    time: float
    per_step: np.ndarray
    link_busy: np.ndarray
    links: Links
    congestion: bool

    def busiest(self, k: int = 5) -> list[tuple[int, int, float]]:
        """The k busiest links as (from node, to node, seconds busy)."""
        order = np.argsort(-self.link_busy, kind="stable")[:k]
        return [
            (int(self.links.src[i]), int(self.links.dst[i]), float(self.link_busy[i]))
            for i in order
        ]

    def busy_by_dim(self) -> np.ndarray:
        """Total link-busy seconds per dimension."""
        return np.bincount(self.links.dim, weights=self.link_busy)


def simulate_on_topology(
    schedule: Schedule, topo: Topology, nbytes: float, congestion: bool = False
) -> SimResult:
    """Simulate ``schedule`` (rank i on NPU i) on ``topo`` with an ``nbytes`` buffer per rank."""
    if schedule.world_size != topo.npus:
        raise ValueError(
            f"{schedule.name} is built for {schedule.world_size} ranks but {topo.name} has "
            f"{topo.npus} NPUs: build the schedule for {topo.npus} ranks, or pick a topology "
            "of that size"
        )
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    links = topo.links()
    # The buffer of nbytes is cut into schedule.num_chunks equal pieces (fractional bytes
    # allowed, as the closed forms assume).
    chunk = nbytes / schedule.num_chunks
    routes: dict = {}
    # Each distinct step shape (who sends to whom, how many chunks) is routed and costed
    # once: a ring's steps share one shape per phase (see labsupport.schedules.Rotation), so
    # simulating a 4096-rank ring takes milliseconds, not one Python operation per transfer.
    shapes: dict[tuple, _Shape] = {}  # steps of one shape are costed once
    per_step = np.zeros(len(schedule.steps))
    busy = np.zeros(len(links))
    for i, st in enumerate(schedule.steps):
        if len(st) == 0:
            continue
        rkey, key = _shape_key(st)
        shape = shapes.get(key)
        if shape is None:
            if rkey not in routes:
                routes[rkey] = route(topo, st.src, st.dst)
            t, load = _step(routes[rkey], st, chunk, links, congestion)
            used = np.flatnonzero(load)  # kept sparse: a step loads few of the links
            shape = shapes[key] = _Shape(t, used, load[used])
        shape.steps += 1
        # Steps run one after the other; a step ends when its slowest message has arrived
        # (as in labsupport.costmodel, which has one link per rank).
        per_step[i] = shape.seconds
    for shape in shapes.values():
        busy[shape.links] += shape.steps * shape.load
    return SimResult(schedule.name, float(per_step.sum()), per_step, busy, links, congestion)


@dataclass
class _Shape:
    """One step shape (who sends to whom, how many chunks), costed once for all its steps."""

    seconds: float  # the time of one such step
    links: np.ndarray  # the links it loads (indices into Topology.links())
    load: np.ndarray  # seconds each of those links is busy in one such step
    steps: int = 0  # how many steps of the schedule have this shape


def _shape_key(st: Step) -> tuple[tuple, tuple]:
    """(the key of the step's routes, the key of its shape: routes and chunk counts).

    A rotating step shares its src/dst/rotation arrays with the schedule's other steps:
    their identity is the key (hashing them each step would cost more than the step).
    A step with arrays of its own is keyed by their contents.
    """
    if st.rotation is not None:
        rkey = (id(st.src), id(st.dst))
        return rkey, (*rkey, id(st.rotation))
    rkey = (st.src.tobytes(), st.dst.tobytes())
    return rkey, (*rkey, np.ascontiguousarray(st.count).tobytes())


def _step(
    r: Route, st: Step, chunk: float, links: Links, congestion: bool
) -> tuple[float, np.ndarray]:
    """Time of one step and the seconds each link spends on it."""
    size = st.count * chunk
    seconds = size[r.msg] / links.bytes_per_s[r.link]
    load = np.bincount(r.link, weights=seconds, minlength=len(links))
    # congestion=False: every message costs ASTRA-sim's congestion-unaware
    # hops * latency + bytes / bandwidth per dimension it crosses, whatever else is on the
    # same links (see labsupport.topology.routing).
    if not congestion:
        return float(r.time(size).max()), load
    # congestion=True: a link carries one message at a time, so a message waits for
    # everything else that crosses its busiest link in that step:
    # hops * latency + (bytes on that link) / bandwidth. A ring laid badly across servers,
    # many ranks sharing one NIC, or an all-to-all on a ring show up here and not in the
    # congestion-unaware mode.
    # Each message waits, in each dimension, for its most loaded link to carry everything.
    dims = int(r.dim.max()) + 1 if len(r.dim) else 1
    worst = np.zeros((len(st), dims))
    np.maximum.at(worst, (r.msg, r.dim), load[r.link])
    return float((r.latency + worst.sum(axis=1)).max()), load
