"""Pictures of a topology: the network drawn, a ring laid over it, and how busy each link was.

::

    from labsupport import topology
    from labsupport.runtime.viz.topology import draw_rings, draw_topology, explore_rings
    from labsupport.runtime.viz.topology import link_heatmap
    topo = topology.presets["ascend-a2-2x8"]
    draw_topology(topo, ring=range(16))                    # servers, links, and the ring's hops
    draw_rings(topo, standard_rings(2, 8))                 # two rank orders side by side
    explore_rings()                                        # the same, behind widgets
    link_heatmap(topology.simulate_on_topology(sched, topo, 2**26))    # busy seconds, from -> to

NPUs of one group of dimension 0 (one server) sit on a circle; servers sit side
by side, a circle's width apart; a switch is a square below the NPUs it joins.
A ring's hops inside a server are drawn as chords between the NPUs (their ends
stop short of the labels); hops between servers as arcs that bend away from
the servers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from labsupport.runtime.language import _
from labsupport.topology import SimResult, Topology
from labsupport.units import format_time

_DIM_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
_SPACING = 3.6  # centre-to-centre distance of two servers' circles (radius 1)


def positions(topo: Topology) -> np.ndarray:
    """(x, y) of every graph node: NPUs first, then switches."""
    n0 = topo.dims[0].npus
    npu = np.arange(topo.npus)
    server, local = npu // n0, npu % n0
    angle = np.pi / 2 - 2 * np.pi * local / n0
    radius = 1.0 if n0 > 1 else 0.0
    xy = np.stack([_SPACING * server + radius * np.cos(angle), radius * np.sin(angle)], axis=1)
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
            out[s] = (x, -1.9 - 0.6 * (dim - 1))
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
    # nodes and labels above the ring's arrows (zorder 5), so no arrow hides a label
    ax.scatter(*xy[: topo.npus].T, s=260, c="white", edgecolors="black", zorder=6)
    for i in range(topo.npus):
        ax.annotate(str(i), xy[i], ha="center", va="center", fontsize=8, zorder=7)
    if len(xy) > topo.npus:
        ax.scatter(*xy[topo.npus :].T, s=120, marker="s", c="lightgrey", edgecolors="k", zorder=6)
    if ring is not None:
        _draw_ring(ax, topo, xy, list(ring))
    labels = [
        f"dim {i}: {d.kind} of {d.npus}, {d.bandwidth:.3g} GB/s, {d.latency:g} ns"
        for i, d in enumerate(topo.dims)
    ]
    if len(labels) > 1 and topo.uplink != "rail":
        labels[1] += {"any": " (any NIC reaches any NIC)", "shared": " (one NIC per server)"}[
            topo.uplink
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
    if ring is not None:  # room for the arcs between servers, above and below the circles
        ax.set_ylim(min(ax.get_ylim()[0], -2.3), max(ax.get_ylim()[1], 1.9))
    ax.axis("off")
    return ax


def _draw_ring(ax: plt.Axes, topo: Topology, xy: np.ndarray, ring: list[int]) -> None:
    """One arrow per hop: a chord inside a server, an arc bent away from the circles across."""
    n0 = topo.dims[0].npus
    for a, b in zip(ring, [*ring[1:], ring[0]], strict=True):
        leaves = a // n0 != b // n0
        # across servers: an arc above the circles when it runs right, below when it runs left
        bend = -0.2 if leaves else 0.0
        ax.annotate(
            "",
            xy=xy[b],
            xytext=xy[a],
            arrowprops=dict(
                arrowstyle="-|>",
                color="crimson",
                lw=2.2 if leaves else 1.4,
                alpha=0.85,
                shrinkA=10,
                shrinkB=10,
                connectionstyle=f"arc3,rad={bend}",
            ),
            zorder=5,
        )


def crossings(ring: Sequence[int], per_server: int) -> int:
    """How many hops of ``ring`` (rank r on NPU r) go from one server to another."""
    ring = list(ring)
    return sum(
        a // per_server != b // per_server for a, b in zip(ring, ring[1:] + ring[:1], strict=True)
    )


def standard_rings(servers: int, per_server: int) -> dict[str, list[int]]:
    """Two rank orders over ``servers`` servers: NPU by NPU, and ranks dealt to servers in turn.

    The first crosses between servers ``servers`` times (once per server, 0 if there is
    one); the second, with two or more servers, on every hop.
    """
    p = servers * per_server
    dealt = [per_server * (i % servers) + i // servers for i in range(p)]
    return {"ring in NPU order": list(range(p)), "ranks dealt to servers in turn": dealt}


def draw_rings(
    topo: Topology, rings: Mapping[str, Sequence[int]], axes: Sequence[plt.Axes] | None = None
) -> list[plt.Axes]:
    """One panel per ring: ``topo`` with the ring's hops, titled with how many hops cross."""
    if axes is None:
        _, axes = plt.subplots(1, len(rings), figsize=(6.4 * len(rings), 4.4), squeeze=False)
        axes = list(axes[0])
    per_server = topo.dims[0].npus
    for ax, (label, ring) in zip(axes, rings.items(), strict=True):
        draw_topology(topo, ring=ring, ax=ax)
        k = crossings(ring, per_server)
        ax.set_title(f"{label}: {k} of {len(ring)} hops cross", fontsize=10)
    return list(axes)


def ring_schedule(order: Sequence[int]):  # noqa: ANN201 - a labsupport.schedules.Schedule
    """A ring all-reduce visiting the ranks in ``order`` (ring position i is rank order[i])."""
    from labsupport.schedules import Schedule, ring_all_reduce

    order = np.asarray(order)
    plain = ring_all_reduce(len(order))
    steps = tuple(st.mapped(order) for st in plain.steps)
    return Schedule("ring", "all_reduce", len(order), len(order), steps)


def explore_rings(topo: Topology | None = None, nbytes: int = 256 * 2**20, servers: int = 2):  # noqa: ANN201
    """Widgets over a ring laid on servers: ranks per server and the ring's order.

    ``topo`` (default: two Atlas A2 servers, switch wiring) gives the links; the
    number of NPUs per server is changed by the "ranks per server" buttons. Under the
    picture: the ring all-reduce of ``nbytes`` simulated with congestion, on the wiring
    as it is and with one NIC per server (``uplink="shared"``). Returns an ipywidgets VBox.
    """
    import io

    import ipywidgets as widgets

    from labsupport.topology import ascend_a2, simulate_on_topology

    base = topo if topo is not None else ascend_a2(servers)
    per = widgets.ToggleButtons(options=[2, 4, 8], value=base.dims[0].npus,
                                description=_("ranks/server"))  # fmt: skip
    order = widgets.ToggleButtons(options=list(standard_rings(2, 2)), description=_("ring order"))
    picture = widgets.Image(format="png")
    caption = widgets.HTML()

    def show(_change: object = None) -> None:
        dims = (replace(base.dims[0], npus=per.value), *base.dims[1:])
        shown = replace(base, dims=dims, name=f"{base.dims[1].npus} servers x {per.value}")
        ring = standard_rings(shown.npus // per.value, per.value)[order.value]
        fig, ax = plt.subplots(figsize=(7.2, 4.4))
        draw_rings(shown, {order.value: ring}, axes=[ax])
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        picture.value = png.getvalue()
        sched = ring_schedule(ring)
        own = simulate_on_topology(sched, shown, nbytes, congestion=True).time
        shared = simulate_on_topology(
            sched, replace(shown, uplink="shared"), nbytes, congestion=True
        ).time
        caption.value = _(
            "ring all-reduce of {mib:g} MiB, simulated with congestion: "
            "<b>{own}</b> with one NIC per NPU, <b>{shared}</b> with one NIC per server"
        ).format(mib=nbytes / 2**20, own=format_time(own), shared=format_time(shared))

    per.observe(show, names="value")
    order.observe(show, names="value")
    show()
    return widgets.VBox([per, order, caption, picture])


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
