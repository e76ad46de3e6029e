"""Pictures of a topology: the network drawn, a ring laid over it, and how busy each link was.

::

    from labsupport import topology
    from labsupport.viz.topology import draw_topology, link_heatmap
    topo = topology.presets["ascend-a2-2x8"]
    draw_topology(topo, ring=range(16))                    # servers, links, and the ring's hops
    link_heatmap(topology.simulate(sched, topo, 2**26))    # busy seconds, from -> to

NPUs of one group of dimension 0 (one server) sit on a circle; servers sit side
by side; a switch is a square at the middle of the NPUs it joins.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from labsupport.topology import SimResult, Topology

_DIM_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")


def positions(topo: Topology) -> np.ndarray:
    """(x, y) of every graph node: NPUs first, then switches."""
    n0 = topo.dims[0].npus
    npu = np.arange(topo.npus)
    server, local = npu // n0, npu % n0
    angle = np.pi / 2 - 2 * np.pi * local / n0
    radius = 1.0 if n0 > 1 else 0.0
    xy = np.stack([3.0 * server + radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    links = topo.links()
    switches = topo.switch_offsets()[-1] - topo.npus
    out = np.zeros((topo.npus + switches, 2))
    out[: topo.npus] = xy
    for s in range(topo.npus, topo.npus + switches):
        members = links.src[links.dst == s]
        centre = xy[members].mean(axis=0)
        dim = int(links.dim[links.dst == s][0])
        if dim == 0:
            out[s] = centre
        else:  # in a row below the servers, in the order of their index
            k, count = s - topo.switch_offsets()[dim], topo.groups(dim)
            width = xy[:, 0].max() - xy[:, 0].min() + 1.0
            x = xy[:, 0].min() - 0.5 + width * (k + 0.5) / count
            out[s] = (x, -2.0 - 0.6 * (dim - 1))
    return out


def draw_topology(
    topo: Topology,
    ring: Sequence[int] | None = None,
    result: SimResult | None = None,
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Draw NPUs, switches and links (colour: dimension, or busy time if ``result``).

    ``ring`` (a rank order, rank r on NPU r) is drawn as red arrows, one per hop;
    hops that leave a server are drawn thicker.
    """
    if ax is None:
        servers = topo.npus // topo.dims[0].npus
        _, ax = plt.subplots(figsize=(min(3.2 * servers + 1, 14), 4.2))
    xy = positions(topo)
    links = topo.links()
    pairs = {}
    for i in range(len(links)):  # one line per pair of nodes, whichever direction
        key = (min(links.src[i], links.dst[i]), max(links.src[i], links.dst[i]))
        busy = result.link_busy[i] if result is not None else 0.0
        dim = int(links.dim[i])
        pairs[key] = (dim, max(busy, pairs.get(key, (dim, 0.0))[1]))
    cmap = plt.get_cmap("viridis")
    top = max((b for _, b in pairs.values()), default=0.0) or 1.0
    for (a, b), (dim, busy) in pairs.items():
        color = cmap(busy / top) if result is not None else _DIM_COLORS[dim % 4]
        ax.plot(*xy[[a, b]].T, color=color, lw=1.0 + dim, alpha=0.8, zorder=1)
    ax.scatter(*xy[: topo.npus].T, s=260, c="white", edgecolors="black", zorder=3)
    for i in range(topo.npus):
        ax.annotate(str(i), xy[i], ha="center", va="center", fontsize=8, zorder=4)
    if len(xy) > topo.npus:
        ax.scatter(*xy[topo.npus :].T, s=120, marker="s", c="lightgrey", edgecolors="k", zorder=3)
    if ring is not None:
        _draw_ring(ax, topo, xy, list(ring))
    labels = [
        f"dim {i}: {d.kind} of {d.npus}, {d.bandwidth:.3g} GB/s, {d.latency:g} ns"
        for i, d in enumerate(topo.dims)
    ]
    for i, text in enumerate(labels):
        ax.plot([], [], color=_DIM_COLORS[i % 4], lw=1.0 + i, label=text)
    if result is None:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=8, frameon=False)
    else:
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, top * 1e3))
        ax.figure.colorbar(sm, ax=ax, label="link busy (ms)", shrink=0.8)
    ax.set_title(f"{topo.name}: {topo.npus} NPUs (GB = 2^30 B)")
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def _draw_ring(ax: plt.Axes, topo: Topology, xy: np.ndarray, ring: list[int]) -> None:
    n0 = topo.dims[0].npus
    for a, b in zip(ring, [*ring[1:], ring[0]], strict=True):
        leaves = a // n0 != b // n0
        ax.annotate(
            "",
            xy=xy[b],
            xytext=xy[a],
            arrowprops=dict(
                arrowstyle="-|>",
                color="crimson",
                lw=2.5 if leaves else 1.2,
                shrinkA=9,
                shrinkB=9,
                connectionstyle="arc3,rad=0.25" if leaves else "arc3,rad=0.1",
            ),
            zorder=5,
        )


def link_heatmap(
    result: SimResult, ax: plt.Axes | None = None, vmax_ms: float | None = None
) -> plt.Axes:
    """Busy time of every link as a from x to matrix (ms); blank where there is no link.

    Give two heat maps the same ``vmax_ms`` to compare them colour for colour.
    """
    links = result.links
    nodes = int(max(links.src.max(), links.dst.max())) + 1
    grid = np.full((nodes, nodes), np.nan)
    grid[links.src, links.dst] = result.link_busy * 1e3
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.6))
    im = ax.imshow(grid, cmap="magma_r", interpolation="nearest", vmin=0, vmax=vmax_ms)
    ax.figure.colorbar(im, ax=ax, label="busy (ms)")
    ax.set_xlabel("to node (NPUs, then switches)")
    ax.set_ylabel("from node")
    mode = "with congestion" if result.congestion else "congestion-unaware"
    ax.set_title(f"{result.name}: busy time per link ({mode})", fontsize=10)
    return ax
