"""A network in ASTRA-sim's words: one building block per dimension, NPUs numbered across them.

Start at :class:`Dim` (one dimension), then :class:`Topology` (a list of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod

import numpy as np

from labsupport.units import format_time

# ASTRA-sim's analytical backend describes a network as a list of dimensions. Each
# dimension is a Ring, a FullyConnected mesh or a Switch of ``npus`` NPUs, with a link
# ``bandwidth`` in GB/s and a ``latency`` in ns per hop.
KINDS = ("Ring", "FullyConnected", "Switch")
UPLINKS = ("rail", "shared", "any")
# ASTRA-sim's GB is 2**30 bytes (bw_GBps_to_Bpns in its BasicTopology), so 50 GB/s there is
# 53.7e9 bytes/s; gb_per_s converts from the decimal GB/s and Gb/s that data sheets use.
GIB = 2**30  # ASTRA-sim's "GB"


def gb_per_s(value: float, unit: str = "GB/s") -> float:
    """Convert a data-sheet bandwidth to ASTRA-sim GB/s (2**30 bytes per second).

    ``unit`` is ``"GB/s"`` (10**9 bytes/s, as NVIDIA and nccl-tests count) or
    ``"Gb/s"`` (10**9 bits/s, as NICs are sold): 200 Gb/s RoCE is 23.28.
    """
    factor = {"GB/s": 1e9, "Gb/s": 1e9 / 8}
    if unit not in factor:
        raise ValueError(f"unit must be 'GB/s' or 'Gb/s', not {unit!r}")
    return value * factor[unit] / GIB


@dataclass(frozen=True)
class Dim:
    """One dimension of the network: ``kind`` of ``npus`` NPUs, GB/s (2**30 B) and ns per hop."""

    kind: str
    npus: int
    bandwidth: float
    latency: float
    bidirectional: bool = True  # Rings only: messages may go either way round

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"topology {self.kind!r} is not one of ASTRA-sim's {KINDS}")
        if self.npus < 1:
            raise ValueError(f"a {self.kind} needs at least 1 NPU, got {self.npus}")
        if self.bandwidth <= 0 or self.latency < 0:
            raise ValueError(
                f"{self.kind}: bandwidth must be > 0 GB/s and latency >= 0 ns, "
                f"got {self.bandwidth} and {self.latency}"
            )

    @property
    def bytes_per_s(self) -> float:
        """Link bandwidth in bytes per second."""
        return self.bandwidth * GIB

    @property
    def links_per_group(self) -> int:
        """Directed links in one group of this dimension (the NPUs that differ only here)."""
        n = self.npus
        if self.kind == "Ring":
            return 2 * n if self.bidirectional else n
        return n * (n - 1) if self.kind == "FullyConnected" else 2 * n

    def hops(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Hops from local NPU ``a`` to ``b`` in this dimension, as ASTRA-sim counts them."""
        # A message between NPUs that differ in one coordinate crosses that dimension only:
        # FullyConnected takes 1 hop, Switch 2 (up to the switch, down to the NPU), Ring the
        # shorter way round (clockwise only if not bidirectional).
        if self.kind == "FullyConnected":
            return np.ones_like(a)
        if self.kind == "Switch":
            return np.full_like(a, 2)
        clockwise = (b - a) % self.npus
        if not self.bidirectional:
            return clockwise
        return np.minimum(clockwise, self.npus - clockwise)


@dataclass(frozen=True)
class Links:
    """Every directed link of a topology, one entry per link (numpy arrays).

    ``src``/``dst`` are graph nodes: NPUs are 0..npus-1, switches follow.
    """

    src: np.ndarray
    dst: np.ndarray
    dim: np.ndarray
    bytes_per_s: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class Topology:
    """A multi-dimensional network, as in an ASTRA-sim analytical network config.

    ``sources`` says where each figure comes from; ``note`` anything a user must know.
    ``uplink`` says how a message leaves its server (dimension-0 group):
    ``"rail"`` (ASTRA-sim: NPU i's links reach NPU i of the other servers, so a
    message for another index first crosses its own server), ``"shared"`` (one
    NIC per server, NPU 0's, shared by all), or ``"any"`` (each NPU's NIC
    reaches every NPU of the other servers through the switches, as in a
    fat-tree, or ``labsupport.netem``; the higher dimensions must be Switches).
    Only ``"rail"`` exists in ASTRA-sim.
    """

    dims: tuple[Dim, ...]
    name: str = "topology"
    sources: tuple[str, ...] = field(default=(), compare=False)
    note: str = field(default="", compare=False)
    uplink: str = "rail"

    def __post_init__(self) -> None:
        if not self.dims:
            raise ValueError("a topology needs at least one dimension")
        if self.uplink not in UPLINKS:
            raise ValueError(f"uplink must be one of {UPLINKS}, not {self.uplink!r}")
        if self.uplink == "any" and any(d.kind != "Switch" for d in self.dims[1:]):
            raise ValueError('uplink="any" needs Switch dimensions above dimension 0')

    @property
    def npus(self) -> int:
        """Number of NPUs (ranks) in the whole network."""
        return prod(d.npus for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """NPUs per dimension."""
        return tuple(d.npus for d in self.dims)

    def with_latency(self, *latency_ns: float) -> Topology:
        """The same network with these per-hop latencies (ns), one per dimension."""
        if len(latency_ns) != len(self.dims):
            raise ValueError(f"give one latency per dimension ({len(self.dims)})")
        dims = tuple(
            replace(d, latency=float(x)) for d, x in zip(self.dims, latency_ns, strict=True)
        )
        return replace(self, dims=dims, note=self.note + " Latencies set by the user.")

    def address(self, npu: np.ndarray | int) -> np.ndarray:
        """Coordinates of NPUs, shape (..., dims): dimension 0 varies fastest."""
        # NPU i has one coordinate per dimension, dimension 0 varying fastest: with dimensions
        # of 8 and 4 NPUs, NPU 13 is (5, 1), the sixth NPU of the second server.
        npu = np.asarray(npu)
        if np.any((npu < 0) | (npu >= self.npus)):
            raise ValueError(f"NPU ids must be in 0..{self.npus - 1}")
        strides = self.strides
        return np.stack([(npu // s) % d.npus for s, d in zip(strides, self.dims, strict=True)], -1)

    @property
    def strides(self) -> list[int]:
        """How far apart two NPUs are whose coordinate in dimension d differs by one."""
        out, s = [], 1
        for d in self.dims:
            out.append(s)
            s *= d.npus
        return out

    def group(self, npu: np.ndarray, d: int) -> np.ndarray:
        """Which group of dimension ``d`` an NPU sits in (its other coordinates, as one number)."""
        s, n = self.strides[d], self.dims[d].npus
        return (npu // (s * n)) * s + npu % s

    def groups(self, d: int) -> int:
        """Number of groups of dimension d (e.g. one intra-server mesh per server)."""
        return self.npus // self.dims[d].npus

    def link_offsets(self) -> list[int]:
        """First global link id of each dimension."""
        out, total = [], 0
        for i, d in enumerate(self.dims):
            out.append(total)
            total += self.groups(i) * d.links_per_group
        return [*out, total]

    def switch_offsets(self) -> list[int]:
        """First graph-node id of each dimension's switches (one switch per Switch group)."""
        out, total = [], self.npus
        for i, d in enumerate(self.dims):
            out.append(total)
            total += self.groups(i) if d.kind == "Switch" else 0
        return [*out, total]

    def links(self) -> Links:
        """Every directed link: its two ends (graph nodes), dimension and bandwidth."""
        srcs, dsts, dims = [], [], []
        switches = self.switch_offsets()
        for i, d in enumerate(self.dims):
            n, s = d.npus, self.strides[i]
            g = np.arange(self.groups(i))
            base = (g // s) * s * n + g % s  # the NPU with coordinate 0 in each group
            a, b = _local_links(d)
            npu = base[:, None] + np.arange(n)[None, :] * s  # (groups, n)
            if d.kind == "Switch":  # a < n: NPU a up to the switch; a >= n: switch down to b
                sw = switches[i] + g[:, None]
                up = a < n
                src = np.where(up, npu[:, np.minimum(a, n - 1)], sw)
                dst = np.where(up, sw, npu[:, b])
            else:
                src, dst = npu[:, a], npu[:, b]
            srcs.append(src.ravel())
            dsts.append(dst.ravel())
            dims.append(np.full(src.size, i))
        dim = np.concatenate(dims)
        bw = np.array([d.bytes_per_s for d in self.dims])[dim]
        return Links(np.concatenate(srcs), np.concatenate(dsts), dim, bw)

    def describe(self) -> str:
        """One line per dimension, in ASTRA-sim's words and in bytes per second."""
        lines = [f"{self.name}: {self.npus} NPUs"]
        for i, d in enumerate(self.dims):
            lines.append(
                f"  dim {i}: {d.kind} of {d.npus}, {d.bandwidth:.3g} GB/s (2^30 B) "
                f"= {d.bytes_per_s / 1e9:.3g}e9 B/s per link, "
                f"{format_time(d.latency * 1e-9) if d.latency else '0 ns'} per hop"
            )
        return "\n".join(lines)


def _local_links(d: Dim) -> tuple[np.ndarray, np.ndarray]:
    """The links of one group as (from, to) local indices, in local link id order.

    Ring: clockwise i -> i+1 are ids 0..n-1, anticlockwise i -> i-1 are n..2n-1.
    FullyConnected: i -> j is id i*(n-1) + (j if j < i else j-1).
    Switch: ids 0..n-1 go up from NPU i (returned as (i, 0)), n..2n-1 go down to
    NPU j (returned as (n + j, j)).
    """
    n = d.npus
    i = np.arange(n)
    if d.kind == "Ring":
        a = np.concatenate([i, i]) if d.bidirectional else i
        b = np.concatenate([(i + 1) % n, (i - 1) % n]) if d.bidirectional else (i + 1) % n
        return a, b
    if d.kind == "FullyConnected":
        a, b = np.divmod(np.arange(n * n), n)
        keep = a != b
        return a[keep], b[keep]
    return np.arange(2 * n), np.concatenate([np.zeros(n, dtype=int), i])
