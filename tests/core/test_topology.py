"""Topologies and the simulator: ASTRA-sim's congestion-unaware cost by hand; configs round-trip."""

import time

import numpy as np
import pytest

from labsupport import costmodel as cm
from labsupport import schedules as sch
from labsupport import topology as T
from labsupport.runtime import astra

GIB = 2**30
RING_SWITCH = {  # ASTRA-sim tutorials, hoti2024/demo4/inputs/Ring_Switch.yml
    "topology": ["Ring", "Switch"],
    "npus_count": [4, 2],
    "bandwidth": [50.0, 10.0],
    "latency": [500.0, 2500.0],
}


# ---------------------------------------------------------------------------
# One message: hops x latency + bytes / bandwidth, with ASTRA-sim's GB = 2^30 B.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst", "want"),
    [
        (0, 1, 1 * 500e-9 + 2**20 / (50 * GIB)),  # Ring neighbour: 1 hop
        (0, 2, 2 * 500e-9 + 2**20 / (50 * GIB)),  # Ring, opposite side: 2 hops
        (0, 3, 1 * 500e-9 + 2**20 / (50 * GIB)),  # Ring the short way (anticlockwise)
        (1, 5, 2 * 2500e-9 + 2**20 / (10 * GIB)),  # Switch: up and down, 2 hops
    ],
)
def test_message_time_is_astra_sims_congestion_unaware_formula(src, dst, want):
    topo = astra.from_astra_sim(RING_SWITCH)
    assert T.message_time(topo, src, dst, 2**20) == pytest.approx(want, rel=1e-12)


def test_fully_connected_is_one_hop_and_unidirectional_ring_goes_clockwise():
    fc = T.Topology((T.Dim("FullyConnected", 16, 50.0, 500.0),))
    assert T.message_time(fc, 0, 7, 10**6) == pytest.approx(500e-9 + 10**6 / (50 * GIB))
    ring = T.Topology((T.Dim("Ring", 8, 25.0, 100.0, bidirectional=False),))
    assert T.message_time(ring, 1, 0, 1000) == pytest.approx(7 * 100e-9 + 1000 / (25 * GIB))


def test_a_message_across_two_dimensions_pays_both():
    topo = astra.from_astra_sim(RING_SWITCH)
    want = (500e-9 + 1000 / (50 * GIB)) + (2 * 2500e-9 + 1000 / (10 * GIB))
    assert T.message_time(topo, 3, 4, 1000) == pytest.approx(want)  # (3,0) -> (0,1)


def test_units_and_bad_input():
    assert T.gb_per_s(200, "Gb/s") == pytest.approx(25e9 / GIB)
    with pytest.raises(ValueError, match="not one of"):
        T.Dim("Torus", 4, 1.0, 1.0)
    with pytest.raises(ValueError, match="same number of dimensions"):
        astra.from_astra_sim({**RING_SWITCH, "latency": [1.0]})
    with pytest.raises(ValueError, match="needs the keys"):
        astra.from_astra_sim({"topology": ["Ring"]})
    with pytest.raises(ValueError, match="build the schedule for 8 ranks"):
        T.simulate_on_topology(sch.ring_all_reduce(4), astra.from_astra_sim(RING_SWITCH), 100)


# ---------------------------------------------------------------------------
# ASTRA-sim configs in and out; presets carry their sources.
# ---------------------------------------------------------------------------


def test_astra_sim_yaml_round_trips(tmp_path):
    topo = astra.from_astra_sim(RING_SWITCH)
    path = tmp_path / "Ring_Switch.yml"
    assert astra.to_astra_sim(topo, path) == RING_SWITCH
    again = astra.from_astra_sim(path)
    assert again.dims == topo.dims and again.npus == 8 and again.name == "Ring_Switch"
    with pytest.raises(FileNotFoundError):
        astra.from_astra_sim(tmp_path / "missing.yml")


def test_presets_have_sources_and_the_right_shape():
    for name, topo in T.presets.items():
        assert topo.sources, f"{name} has no source"
    a2 = T.presets["ascend-a2-2x8"]
    assert a2.shape == (8, 2) and a2.dims[0].kind == "FullyConnected"
    assert a2.dims[1].bytes_per_s == pytest.approx(25e9)  # 200 Gb/s RoCE per NPU
    assert "latency" in a2.note and "unknown" in a2.note
    h100 = T.presets["hgx-h100-validated"]
    assert astra.to_astra_sim(h100) == {
        "topology": ["Switch"], "npus_count": [8], "bandwidth": [400.0], "latency": [936.25]
    }  # fmt: skip


def test_a2_wiring_and_hccs_readings_are_named_options():
    switch, rail = T.presets["ascend-a2-2x8"], T.presets["ascend-a2-2x8-rail"]
    assert switch.uplink == "any" and rail.uplink == "rail" and rail.name.endswith("-rail")
    assert "hccn.conf" in " ".join(switch.sources)
    # a flat ring's crossing hop no longer detours over HCCS when every NIC reaches every NIC
    ring = sch.ring_all_reduce(16)
    assert T.simulate_on_topology(ring, rail, 2**28).time * 1e3 == pytest.approx(29.12, abs=0.01)
    assert T.simulate_on_topology(ring, switch, 2**28).time * 1e3 == pytest.approx(20.13, abs=0.01)
    # the two readings of the reported 56 GB/s: per direction, or both directions together
    half = T.ascend_a2(2, hccs="bidirectional")
    assert half.dims[0].bytes_per_s == pytest.approx(28e9) and "bidirectional" in half.name
    assert switch.dims[0].bytes_per_s == pytest.approx(56e9)
    with pytest.raises(ValueError, match="rail"):
        T.ascend_a2(2, wiring="torus")
    with pytest.raises(ValueError, match="per_direction"):
        T.ascend_a2(2, hccs="fast")
    with pytest.raises(ValueError, match="uplink"):
        astra.to_astra_sim(switch)  # ASTRA-sim has rail wiring only
    assert astra.to_astra_sim(rail)["topology"] == ["FullyConnected", "Switch"]


def test_links_are_counted_per_building_block():
    topo = astra.from_astra_sim(
        RING_SWITCH
    )  # 2 rings of 4 (8 links each), 4 switches of 2 (4 each)
    links = topo.links()
    assert len(links) == 2 * 8 + 4 * 4
    assert np.all(links.src != links.dst)
    assert set(links.dst[links.dim == 1].tolist()) >= {8, 9, 10, 11}  # the switches


# ---------------------------------------------------------------------------
# Schedules on topologies.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("p", [2, 3, 8])
def test_ring_all_reduce_on_a_fully_connected_network_is_the_closed_form(p):
    topo = T.Topology((T.Dim("FullyConnected", p, 10.0, 2000.0),))
    n = 12_345_678.0
    got = T.simulate_on_topology(sch.ring_all_reduce(p), topo, n).time
    assert got == pytest.approx(cm.ring_all_reduce_time(n, p, 2000e-9, 1 / (10 * GIB)), rel=1e-12)


@pytest.mark.parametrize(("nodes", "per_node"), [(2, 2), (4, 8), (3, 5), (1, 4), (4, 1)])
def test_hierarchical_all_reduce_simulates_to_its_closed_form(nodes, per_node):
    intra, inter = (1e-6, 100e9), (20e-6, 5e9)
    topo = T.two_level(nodes, per_node, intra, inter)
    n = 2.0**24
    got = T.simulate_on_topology(
        sch.hierarchical_all_reduce(nodes * per_node, per_node), topo, n
    ).time
    want = cm.hierarchical_all_reduce_time(
        n, nodes * per_node, 1e-6, 1 / 100e9, ranks_per_node=per_node, inter_alpha=20e-6,
        inter_beta=1 / 5e9,
    )  # fmt: skip
    assert got == pytest.approx(want, rel=1e-12)


def test_hierarchical_beats_flat_ring_over_a_slow_inter_node_link():
    topo = T.two_level(4, 8, (1e-6, 100e9), (20e-6, 5e9))
    flat = T.simulate_on_topology(sch.ring_all_reduce(32), topo, 2**26).time
    two = T.simulate_on_topology(sch.hierarchical_all_reduce(32, 8), topo, 2**26).time
    assert two < flat / 3


def test_link_busy_adds_up_to_the_bytes_sent():
    topo = T.Topology((T.Dim("Ring", 6, 1.0, 0.0),))
    n = 6 * 2**20
    res = T.simulate_on_topology(sch.ring_all_reduce(6), topo, n)
    # Every rank sends 2(p-1)/p n bytes over its clockwise link, and nothing goes the other way.
    np.testing.assert_allclose(res.link_busy[:6], 2 * 5 / 6 * n / GIB)
    np.testing.assert_allclose(res.link_busy[6:], 0)
    assert len(res.per_step) == 10 and res.time == pytest.approx(res.per_step.sum())


def test_congestion_shows_when_messages_share_a_link():
    # All-to-all-like step: everyone sends to rank 0 on a unidirectional ring.
    topo = T.Topology((T.Dim("Ring", 4, 1.0, 0.0, bidirectional=False),))
    step = sch.Step.columns(src=[1, 2, 3], dst=0, start=0, stop=1, reduce=True)
    s = sch.Schedule("gather", "reduce", 4, 1, (step,))
    free = T.simulate_on_topology(s, topo, GIB).time
    busy = T.simulate_on_topology(s, topo, GIB, congestion=True).time
    assert free == pytest.approx(1.0)  # each message alone takes 1 s
    assert busy == pytest.approx(3.0)  # link 3 -> 0 carries all three messages
    ring = sch.ring_all_reduce(4)
    assert T.simulate_on_topology(ring, topo, GIB, congestion=True).time == pytest.approx(
        T.simulate_on_topology(ring, topo, GIB).time
    )  # a ring on a ring never shares a link


def test_a_4096_rank_ring_builds_and_simulates_quickly():
    t0 = time.perf_counter()
    res = T.simulate_on_topology(sch.ring_all_reduce(4096), T.ascend_a2(512), 2**28)
    assert time.perf_counter() - t0 < 5  # generous: the machine may be busy (benchmark: < 1 s)
    assert len(res.per_step) == 2 * 4095


# ---------------------------------------------------------------------------
# The hierarchical schedule on paper and on real process groups.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
@pytest.mark.parametrize("per_node", [1, 2, 3, 4])
def test_hierarchical_schedule_computes_an_all_reduce(nodes, per_node):
    ring = sch.hierarchical_all_reduce(nodes * per_node, per_node, intra="ring")
    direct = sch.hierarchical_all_reduce(nodes * per_node, per_node)  # direct (mesh) by default
    sch.verify(ring)
    sch.verify(direct)
    assert len(ring) == 2 * (per_node - 1) + 2 * (nodes - 1)
    assert len(direct) == 2 * (per_node > 1) + 2 * (nodes - 1)
    with pytest.raises(sch.ScheduleError, match="must divide"):
        sch.hierarchical_all_reduce(6, 4)
    with pytest.raises(ValueError, match="direct"):
        sch.hierarchical_all_reduce(4, 2, intra="tree")


cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/


def _execute_hierarchical(shapes, lengths):
    import torch
    import torch.distributed as dist

    me, failures = dist.get_rank(), []
    for nodes, per_node in shapes:
        p = nodes * per_node
        group = dist.new_group(list(range(p))) if p < dist.get_world_size() else None
        if me >= p:
            continue
        for n in lengths:
            for intra in ("direct", "ring"):
                x = torch.randn(n, generator=torch.Generator().manual_seed(n + me)).mul(100)
                ref = x.clone()
                dist.all_reduce(ref, group=group)
                sched = sch.hierarchical_all_reduce(p, per_node, intra)
                got = sch.execute(sched, x, group=group)
                if not torch.allclose(got, ref, rtol=1e-5, atol=1e-4):
                    failures.append(f"{nodes}x{per_node} {intra} n={n} differs on rank {me}")
    return failures


def test_hierarchical_execute_matches_dist_all_reduce():
    lab = pytest.importorskip("labsupport")
    shapes = [(2, 3), (3, 2), (2, 2), (1, 4), (4, 1)]
    with lab.Cluster(6, backend="gloo", timeout=120) as c:
        results = c.run(_execute_hierarchical, shapes, [0, 1, 5, 6, 1000])
    assert [f for rank in results for f in rank] == []


# ---------------------------------------------------------------------------
# One NIC per server, and the graders of notebook 05.
# ---------------------------------------------------------------------------


def test_a_shared_uplink_goes_through_npu_0_and_congests():
    topo = T.two_level(2, 4, (0.0, 10 * GIB), (0.0, GIB), uplink="shared")
    # NPU 2 (node 0) -> NPU 7 (node 1): 2 -> 0 inside, 0 -> 4 across, 4 -> 7 inside.
    want = 3 * 2**20 / (10 * GIB) - 2**20 / (10 * GIB) + 2**20 / GIB
    assert T.message_time(topo, 2, 7, 2**20) == pytest.approx(want)
    with pytest.raises(ValueError, match="no uplink"):
        astra.to_astra_sim(topo)
    bad = [0, 4, 1, 5, 2, 6, 3, 7]  # every hop crosses: 4 messages share each node's uplink
    from labsupport.runtime.check.topology import ring_in_order

    npu = list(range(8))
    t_bad = T.simulate_on_topology(ring_in_order(bad, npu), topo, 2**26, congestion=True).time
    t_good = T.simulate_on_topology(
        ring_in_order(list(range(8)), npu), topo, 2**26, congestion=True
    ).time
    assert t_bad > 3 * t_good


def _rail_snake(node_of, local_of):
    """A learner's answer: walk rail 0 through the nodes, rail 1 back, ... (even NPUs per node),
    else visit each node whole, entering and leaving on rails that alternate."""
    from labsupport.runtime.check.topology import rail_ring

    return rail_ring(node_of, local_of)


def test_ring_order_grader_wants_hops_between_nodes_to_stay_on_their_rail(capsys):
    from labsupport.runtime.check.topology import check_ring_order

    assert check_ring_order(_rail_snake)
    capsys.readouterr()
    # the old answer (visit each node in turn, in rank order) changes rail when it crosses
    by_node = check_ring_order(
        lambda node_of, local_of: sorted(range(len(node_of)), key=node_of.__getitem__)
    )
    assert not by_node and "change rail" in capsys.readouterr().out
    assert not check_ring_order(lambda node_of, local_of: list(range(len(node_of))))
    assert not check_ring_order(lambda node_of, local_of: [0, 0])
    assert "must list every rank" in capsys.readouterr().out
    assert not check_ring_order(lambda node_of: [0])  # the old one-argument signature
    assert "raised TypeError" in capsys.readouterr().out

    def stub(node_of, local_of):
        raise NotImplementedError

    result = check_ring_order(stub)
    assert not result and not result.implemented


def test_speedup_grader_uses_the_simulator_within_ten_percent():
    from labsupport.runtime.check.topology import check_hierarchical_speedup, hierarchical_speedup

    args = (4, 8, 2**26, (1e-6, 50e9), (10e-6, 5e9))
    model = hierarchical_speedup(*args)
    assert model > 2
    assert check_hierarchical_speedup(model * 1.08, *args)
    assert not check_hierarchical_speedup(model * 1.2, *args)
    assert not check_hierarchical_speedup("fast", *args)
    mesh = hierarchical_speedup(*args, inside="direct")  # a mesh inside: all links at once
    assert mesh > 1.5 * model
    assert check_hierarchical_speedup(mesh, *args, inside="direct")
    assert not check_hierarchical_speedup(model, *args, inside="direct")


@pytest.mark.parametrize(("p", "k"), [(4, 2), (8, 2), (8, 4)])
def test_from_netem_predicts_what_netems_own_model_says(p, k):
    netem = pytest.importorskip("labsupport.netem")
    net = netem.PRESETS["two-nodes"].with_(ranks_per_node=k)
    topo = T.from_netem(net, p)
    assert topo.uplink == "any" and topo.shape == (k, p // k)
    n = 4 * 2**20  # a whole number of 4-byte elements per chunk
    for algo, sched in [("ring", sch.ring_all_reduce(p)), ("hierarchical",
                        sch.hierarchical_all_reduce(p, k))]:  # fmt: skip
        want = netem.model_time("all_reduce", algo, n, p, net)
        assert T.simulate_on_topology(sched, topo, n, congestion=True).time == pytest.approx(
            want, rel=1e-9
        )


def test_uplink_any_goes_straight_to_the_destination_nic():
    topo = T.Topology(
        (T.Dim("FullyConnected", 4, 10.0, 100.0), T.Dim("Switch", 2, 1.0, 1000.0)), uplink="any"
    )
    # NPU 1 (server 0) -> NPU 6 (server 1): no hop inside a server, 2 switch hops.
    assert T.message_time(topo, 1, 6, GIB) == pytest.approx(2 * 1000e-9 + 1.0)
    with pytest.raises(ValueError, match="Switch dimensions"):
        T.Topology((T.Dim("Ring", 4, 1.0, 1.0), T.Dim("Ring", 2, 1.0, 1.0)), uplink="any")


def test_netem_networks_round_trip_through_topologies():
    netem = pytest.importorskip("labsupport.netem")
    for net in (netem.PRESETS["two-nodes"], netem.PRESETS["one-node"]):
        back = T.to_netem(T.from_netem(net, 4))
        assert back.intra == net.intra and back.inter == net.inter
    with pytest.raises(ValueError, match="uplink"):
        T.to_netem(T.presets["ascend-a2-2x8-rail"])
    a2 = T.to_netem(T.presets["ascend-a2-2x8"])  # every NIC reaches every NIC: netem can emulate it
    assert a2.ranks_per_node == 8 and a2.inter.bandwidth == pytest.approx(25e9)


def test_describe_prints_three_figures_and_a_readable_latency():
    from labsupport import netem

    assert "52.2 GB/s (2^30 B) = 56e9 B/s per link, 0 ns per hop" in (
        T.presets["ascend-a2-2x8"].describe()
    )
    emulated = T.from_netem(netem.PRESETS["two-nodes"], 4).describe()
    assert "0.373 GB/s (2^30 B) = 0.4e9 B/s per link, 200 µs per hop" in emulated


@pytest.mark.parametrize(("nodes", "per_node"), [(2, 8), (8, 8), (512, 8), (3, 4), (6, 2)])
def test_hierarchical_with_halving_doubling_across_simulates_to_its_closed_form(nodes, per_node):
    """HCCL's H-D_R at level 1: p = 16, 64, 4096 (and folded node counts) give the closed form."""
    p, intra, inter = nodes * per_node, (1e-6, 100e9), (20e-6, 5e9)
    sched = sch.hierarchical_all_reduce(p, per_node, inter="halving_doubling")
    if p <= 64:
        sch.verify(sched)
    n = 2.0**24
    got = T.simulate_on_topology(sched, T.two_level(nodes, per_node, intra, inter), n).time
    want = cm.hierarchical_all_reduce_time(
        n, p, 1e-6, 1 / 100e9, ranks_per_node=per_node, inter_alpha=20e-6, inter_beta=1 / 5e9,
        inter="halving_doubling",
    )  # fmt: skip
    assert got == pytest.approx(want, rel=1e-12)
    ring = cm.hierarchical_all_reduce_time(
        n, p, 1e-6, 1 / 100e9, ranks_per_node=per_node, inter_alpha=20e-6, inter_beta=1 / 5e9
    )
    if nodes & (nodes - 1) == 0:  # the same bytes across, 2 lg m latencies instead of 2(m-1)
        assert ring - want == pytest.approx(20e-6 * (2 * (nodes - 1) - 2 * np.log2(nodes)))
    with pytest.raises(ValueError, match="inter must be one of"):
        sch.hierarchical_all_reduce(p, per_node, inter="tree")
