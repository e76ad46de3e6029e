"""Which links a message crosses, and what it costs when nothing else is on them.

Start at :func:`route` (a batch of messages through a topology); :func:`message_time` is
one message's congestion-unaware time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labsupport.topology.model import Dim, Topology


@dataclass(frozen=True)
class Route:
    """The routes of a batch of messages.

    ``latency`` (s) and ``seconds_per_byte`` (sum of 1/bandwidth over the
    dimensions crossed) are per message; ``msg``, ``link`` and ``dim`` list every
    (message, link) pair, with the dimension of the link.
    """

    latency: np.ndarray
    seconds_per_byte: np.ndarray
    msg: np.ndarray
    link: np.ndarray
    dim: np.ndarray

    def time(self, nbytes: np.ndarray | float) -> np.ndarray:
        """Congestion-unaware time of each message of ``nbytes`` bytes."""
        return self.latency + np.asarray(nbytes) * self.seconds_per_byte


def route(topo: Topology, src: np.ndarray, dst: np.ndarray) -> Route:
    """Route messages ``src[i] -> dst[i]`` (NPU ids) through ``topo``."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if np.any(src == dst):
        raise ValueError("a message needs two different NPUs")
    target = topo.address(dst)
    cur = src.copy()
    latency = np.zeros(len(src))
    per_byte = np.zeros(len(src))
    offsets = topo.link_offsets()
    msgs, links, dims = [], [], []

    def move(d: int, want: np.ndarray, land: np.ndarray | None = None) -> None:
        """Move every message whose coordinate d is not ``want`` there, within dimension d.

        ``land`` (uplink "any", Switch only): the dimension-0 coordinate the
        message takes on its way down from the switch.
        """
        dim, stride = topo.dims[d], topo.strides[d]
        a = (cur // stride) % dim.npus
        moving = np.flatnonzero(a != want)
        if len(moving) == 0:
            return
        a, b = a[moving], want[moving]
        hops, local = _hops_and_links(dim, a, b)
        # In each dimension a message pays ASTRA-sim's congestion-unaware cost
        # hops * latency + bytes / bandwidth; across several dimensions the costs add up (the
        # NPU in between stores and forwards it).
        #
        # What ASTRA-sim does instead (astra-network-analytical, commit 599a047,
        # congestion_unaware/multi-dim-topology/MultiDimTopology.cpp): its congestion-unaware
        # MultiDimTopology::send charges a message between NPUs that differ in several
        # coordinates for the *first* differing dimension only (get_dim_to_transfer returns
        # the lowest one), as if it crossed that dimension alone. Its per-dimension
        # collectives (ring, direct, halvingDoubling, doubleBinaryTree) send within one
        # dimension, but its oneRing, oneDirect and oneHalvingDoubling build one logical ring
        # over all NPUs (GeneralComplexTopology.cc) and so do send across dimensions: on an
        # A2-like [8, 2] network, a flat ring's hop 7 -> 8 is charged as one HCCS hop there,
        # and here as an HCCS hop plus a RoCE hop (uplink="rail") or a RoCE hop alone
        # (uplink="any"). For messages within one dimension the two agree exactly. An
        # ASTRA-sim-compatible mode is separate work (the runtime's labsupport.runtime.astra).
        latency[moving] += hops * dim.latency * 1e-9
        per_byte[moving] += 1 / dim.bytes_per_s
        group = np.repeat(topo.group(cur[moving], d), hops)
        step0 = 0
        if land is not None:  # down link into the NPU with the landing coordinate
            step0 = land[moving] - cur[moving] % topo.dims[0].npus
            down = np.stack([np.zeros_like(a), np.ones_like(a)], axis=1).ravel() == 1
            group = np.where(down, np.repeat(topo.group(cur[moving] + step0, d), hops), group)
        msgs.append(np.repeat(moving, hops))
        links.append(offsets[d] + group * dim.links_per_group + local)
        dims.append(np.full(int(hops.sum()), d))
        cur[moving] += (b - a) * stride + step0

    leaving = np.zeros(len(src), dtype=bool)  # messages for another dimension-0 group
    for d in range(1, len(topo.dims)):
        leaving |= (src // topo.strides[d]) % topo.dims[d].npus != target[:, d]
    # Two options that ASTRA-sim does not have (see Topology.uplink). "any": a message
    # leaves through its own NPU's link and comes down the switch straight into the
    # destination NPU, with no hop inside either server (a fat-tree, or labsupport.netem).
    if topo.uplink == "any":  # straight out of this NPU's NIC, down into the destination's
        move(0, np.where(leaving, cur % topo.dims[0].npus, target[:, 0]))
        for d in range(1, len(topo.dims)):
            move(d, target[:, d], land=target[:, 0])
    # "shared": the NPUs of a server share one link to the other dimensions, NPU 0's, like a
    # server with one NIC; a message for another server goes to NPU 0 first, crosses, then
    # goes on from NPU 0 of the other server (this makes "many ranks sharing one NIC"
    # visible with congestion=True).
    elif topo.uplink == "shared":  # leave through the group's NPU 0, arrive at NPU 0, go on
        move(0, np.where(leaving, 0, target[:, 0]))
        for d in range(1, len(topo.dims)):
            move(d, target[:, d])
        move(0, target[:, 0])
    else:
        # "rail" (the default, ASTRA-sim's): one differing coordinate at a time, dimension 0
        # first (dimension-order routing): to reach an NPU with another local index on
        # another server, a message first crosses its own server, then the inter-server
        # dimension.
        for d in range(len(topo.dims)):
            move(d, target[:, d])
    cat = (lambda xs: np.concatenate(xs)) if msgs else (lambda xs: np.zeros(0, dtype=np.int64))
    return Route(latency, per_byte, cat(msgs), cat(links), cat(dims))


def _hops_and_links(dim: Dim, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hops of each segment a -> b within one group, and the local link ids crossed, flattened.

    Link numbering follows :func:`labsupport.topology.model._local_links`.
    """
    n = dim.npus
    if dim.kind == "FullyConnected":
        return np.ones_like(a), a * (n - 1) + np.where(b < a, b, b - 1)
    if dim.kind == "Switch":
        return np.full_like(a, 2), np.stack([a, n + b], axis=1).ravel()
    clockwise = (b - a) % n
    forward = (clockwise <= n - clockwise) | (not dim.bidirectional)
    hops = np.where(forward, clockwise, n - clockwise)
    step = np.arange(hops.sum()) - np.repeat(np.cumsum(hops) - hops, hops)  # 0..hops-1
    start, fwd = np.repeat(a, hops), np.repeat(forward, hops)
    local = np.where(fwd, (start + step) % n, n + (start - step) % n)
    return hops, local


def message_time(topo: Topology, src: int, dst: int, nbytes: float) -> float:
    """Seconds for one message of ``nbytes`` from ``src`` to ``dst`` on an idle network."""
    return float(route(topo, np.array([src]), np.array([dst])).time(nbytes)[0])
