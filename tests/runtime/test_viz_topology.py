"""Pictures of a topology: NPUs and switches placed, the ring's hops, busy times in the heat map."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from labsupport import schedules as sch
from labsupport import topology as T
from labsupport.runtime.viz.topology import (
    crossings,
    draw_rings,
    draw_topology,
    explore_rings,
    link_heatmap,
    positions,
    ring_schedule,
    standard_rings,
)


def test_positions_put_servers_side_by_side_and_switches_below():
    topo = T.presets["ascend-a2-2x8"]
    xy = positions(topo)
    assert xy.shape == (16 + 8, 2)  # 16 NPUs, one switch per NPU index
    assert xy[:8, 0].max() < xy[8:16, 0].min()  # server 0 left of server 1
    assert np.all(xy[16:, 1] < xy[:16, 1].min())


def test_draw_topology_draws_one_arrow_per_ring_hop():
    topo = T.presets["ascend-a2-2x8"]
    ax = draw_topology(topo, ring=range(16))
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == 16
    ax = draw_topology(topo, result=T.simulate_on_topology(sch.ring_all_reduce(16), topo, 2**20))
    assert "ascend-a2-2x8" in ax.get_title()


def test_link_heatmap_shows_busy_milliseconds_where_links_are():
    topo = T.Topology((T.Dim("Ring", 4, 1.0, 0.0, bidirectional=False),))
    res = T.simulate_on_topology(sch.ring_all_reduce(4), topo, 4 * T.GIB)
    grid = link_heatmap(res).images[0].get_array()
    assert grid[0, 1] == pytest.approx(6e3)  # 2(p-1)/p * 4 GiB at 1 GiB/s = 6 s
    assert np.ma.is_masked(grid[1, 0]) or np.isnan(grid[1, 0])  # no link 1 -> 0


def test_nodes_and_labels_sit_above_the_rings_arrows_and_servers_do_not_touch():
    topo = T.presets["ascend-a2-2x8"]
    xy = positions(topo)
    gap = xy[8:16, 0].min() - xy[:8, 0].max()
    assert gap > 1.0  # a circle's radius at least between two servers' NPUs
    ax = draw_topology(topo, ring=range(16))
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    labels = [t for t in ax.texts if t.get_text().isdigit()]
    assert min(t.get_zorder() for t in labels) > max(a.get_zorder() for a in arrows)
    nodes = ax.collections[-2 if len(ax.collections) > 1 else -1]
    assert nodes.get_zorder() > max(a.get_zorder() for a in arrows)


def test_standard_rings_cross_once_per_server_or_on_every_hop():
    rings = standard_rings(servers=2, per_server=8)
    good, bad = rings.values()
    assert sorted(good) == sorted(bad) == list(range(16))
    assert crossings(good, 8) == 2 and crossings(bad, 8) == 16
    assert crossings(standard_rings(1, 4)["ring in NPU order"], 4) == 0


def test_draw_rings_titles_each_panel_with_its_crossings():
    topo = T.presets["ascend-a2-2x8"]
    axes = draw_rings(topo, standard_rings(2, 8))
    assert [ax.get_title() for ax in axes] == [
        "ring in NPU order: 2 of 16 hops cross",
        "ranks dealt to servers in turn: 16 of 16 hops cross",
    ]


def test_ring_schedule_is_an_all_reduce_in_the_given_order():
    order = [0, 2, 1, 3]
    sched = ring_schedule(order)
    sch.verify(sched)
    first = sched.steps[0]
    assert sorted(zip(first.src.tolist(), first.dst.tolist(), strict=True)) == [
        (0, 2),
        (1, 3),
        (2, 1),
        (3, 0),
    ]


def test_explore_rings_redraws_when_a_knob_moves():
    box = explore_rings(T.presets["ascend-a2-2x8"])
    per, order, caption, picture = box.children
    before, text = picture.value, caption.value
    assert "ms</b> with one NIC per NPU" in text and "ms</b> with one NIC per server" in text
    order.value = "ranks dealt to servers in turn"  # every hop crosses: one NIC is far slower
    assert picture.value != before and caption.value != text
    shown, text = picture.value, caption.value
    per.value = 2
    assert picture.value != shown and caption.value != text
