"""Pictures of a topology: NPUs and switches placed, the ring's hops, busy times in the heat map."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from labsupport import schedules as sch
from labsupport import topology as T
from labsupport.viz.topology import draw_topology, link_heatmap, positions


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
