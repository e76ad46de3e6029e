"""The newer algorithms (direct, double binary tree, halving orders, hierarchical inside choice):
what they compute, how they run on gloo, and the same time from every interpreter.

One definition per algorithm: the closed form (costmodel.X_time), the cost of its schedule
(costmodel.cost), netem's link model (netem.simulate_on_network) and the topology simulator
(topology.simulate_on_topology) must give one time wherever their network models coincide.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from labsupport import costmodel as cm
from labsupport import netem
from labsupport import schedules as sch
from labsupport import topology as T
from labsupport.netem import Link, Network

SIZES = [2, 3, 4, 6, 8, 12, 16]
LINK = Link(latency=1e-3, bandwidth=50e6)
#: Algorithms whose ranks send several messages in one step: on one port, those queue.
SEVERAL_PER_STEP = {"direct_reduce_scatter", "direct_all_gather", "direct_all_reduce",
                    "naive_all_reduce"}  # fmt: skip


def _closed(name: str, n: float, p: int, ports: str) -> float:
    f = cm.CLOSED_FORMS[name]
    kw = {"ports": ports} if "ports" in inspect.signature(f).parameters else {}
    return f(n, p, LINK.alpha, LINK.beta, **kw)


def _nbytes(sched: sch.Schedule) -> int:
    return 4 * sched.num_chunks * 3 * 5 * 7 * 1024  # whole 4-byte elements in every chunk


# ---------------------------------------------------------------------------
# Every interpreter, one time.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(set(cm.CLOSED_FORMS) - SEVERAL_PER_STEP))
@pytest.mark.parametrize("p", SIZES)
def test_one_port_network_every_interpreter_gives_one_time(name, p):
    """One NIC per rank (netem ranks_per_node=1): the classic model, no congestion."""
    if not sch.supports(name, p):
        pytest.skip("power-of-two world sizes only")
    s = sch.BUILDERS[name](p)
    n, net = _nbytes(s), Network(inter=LINK, ranks_per_node=1)
    closed = _closed(name, n, p, "one")
    topo = T.from_netem(net, p)
    assert cm.cost(s, n).time(LINK.alpha, LINK.beta) == pytest.approx(closed, rel=1e-12)
    assert netem.simulate_on_network(s, n, net).max() == pytest.approx(closed, rel=1e-12)
    assert T.simulate_on_topology(s, topo, n).time == pytest.approx(closed, rel=1e-12)
    assert T.simulate_on_topology(s, topo, n, congestion=True).time == pytest.approx(
        closed, rel=1e-12
    )


@pytest.mark.parametrize("name", sorted(cm.CLOSED_FORMS))
@pytest.mark.parametrize("p", SIZES)
def test_full_mesh_every_interpreter_gives_one_time(name, p):
    """Every ordered pair its own link (one netem node, a FullyConnected dimension)."""
    if not sch.supports(name, p):
        pytest.skip("power-of-two world sizes only")
    s = sch.BUILDERS[name](p)
    n, net = _nbytes(s), Network(intra=LINK)
    closed = _closed(name, n, p, "all")
    topo = T.from_netem(net, p)
    assert cm.cost(s, n).time(LINK.alpha, LINK.beta, ports="all") == pytest.approx(
        closed, rel=1e-12
    )
    assert T.simulate_on_topology(s, topo, n).time == pytest.approx(closed, rel=1e-12)
    assert T.simulate_on_topology(s, topo, n, congestion=True).time == pytest.approx(
        closed, rel=1e-12
    )
    emulated = netem.simulate_on_network(s, n, net).max()
    idle_then_send = "tree" in name or (name == "binomial_reduce" and p & (p - 1))
    if idle_then_send:  # netem's ranks do not wait for the step: an idle rank sends early
        one_step = LINK.time(n / s.num_chunks)
        assert closed - one_step <= emulated * (1 + 1e-12)  # at most one step earlier
        assert emulated <= closed * (1 + 1e-12)
    else:
        assert emulated == pytest.approx(closed, rel=1e-12)


@pytest.mark.parametrize(("p", "k"), [(4, 2), (8, 2), (8, 4), (6, 3), (12, 4), (16, 8)])
@pytest.mark.parametrize(
    ("intra", "across", "algorithm"),
    [
        ("direct", "ring", "hierarchical"),
        ("ring", "ring", "hierarchical_ring"),
        ("direct", "halving_doubling", "hierarchical_hd"),
    ],
)
def test_hierarchical_on_two_levels_every_interpreter_gives_one_time(
    p, k, intra, across, algorithm
):
    inter = Link(latency=5e-3, bandwidth=10e6)
    net = Network(intra=LINK, inter=inter, ranks_per_node=k)
    s = sch.hierarchical_all_reduce(p, k, intra, across)
    sch.verify(s)
    n = _nbytes(s)
    closed = cm.hierarchical_all_reduce_time(
        n, p, LINK.alpha, LINK.beta, ranks_per_node=k, inter_alpha=inter.alpha,
        inter_beta=inter.beta, intra=intra, inter=across,
    )  # fmt: skip
    assert netem.simulate_on_network(s, n, net).max() == pytest.approx(closed, rel=1e-12)
    topo = T.from_netem(net, p)
    assert T.simulate_on_topology(s, topo, n, congestion=True).time == pytest.approx(
        closed, rel=1e-12
    )
    assert netem.model_time("all_reduce", algorithm, n, p, net) == pytest.approx(closed)


def test_direct_inside_a_mesh_node_beats_a_ring_inside():
    """A ring uses one of a rank's k-1 links; direct uses them all (HCCL's Mesh on A2)."""
    a2 = T.presets["ascend-a2-2x8"]
    ring = T.simulate_on_topology(sch.hierarchical_all_reduce(16, 8, "ring"), a2, 2**28).time
    direct = T.simulate_on_topology(sch.hierarchical_all_reduce(16, 8, "direct"), a2, 2**28).time
    assert direct < ring / 3
    # on one port the mesh gains nothing: the direct all-reduce costs what the ring does
    n, p = 2**20, 8
    assert cm.direct_all_reduce_time(n, p, 1e-6, 1e-9) == pytest.approx(
        cm.ring_all_reduce_time(n, p, 1e-6, 1e-9)
    )
    assert cm.direct_all_reduce_time(n, p, 1e-6, 1e-9, ports="all") == pytest.approx(
        2 * 1e-6 + 2 * n / p * 1e-9
    )  # HCCL's Mesh: 2α + 2n/p·β


# ---------------------------------------------------------------------------
# Recursive halving: which partner first.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_starts_with_the_nearest_partner_and_halves_from_n_over_2(p):
    s = sch.rabenseifner_all_reduce(p)
    first, last_rs = s.steps[0], s.steps[int(np.log2(p)) - 1]
    assert np.all(np.abs(first.src - first.dst) == 1) and np.all(first.count == p // 2)
    assert np.all(np.abs(last_rs.src - last_rs.dst) == p // 2) and np.all(last_rs.count == 1)
    far = sch.rabenseifner_all_reduce(p, "farthest_first").steps[0]
    assert np.all(np.abs(far.src - far.dst) == p // 2) and np.all(far.count == p // 2)
    for order in sch.ORDERS:
        sch.verify(sch.rabenseifner_all_reduce(p, order))
    with pytest.raises(ValueError, match="nearest_first"):
        sch.rabenseifner_all_reduce(p, "closest")


def test_reduce_scatter_keeps_the_order_that_leaves_chunk_r_on_rank_r():
    s = sch.recursive_halving_reduce_scatter(8)
    assert np.all(np.abs(s.steps[0].src - s.steps[0].dst) == 4)  # MPICH: mask = pof2 >> 1
    final = sch.chunk_history(s)[-1]
    assert [final[r][r] for r in range(8)] == [0xFF] * 8


def test_on_two_nodes_rabenseifner_costs_what_the_hierarchical_all_reduce_costs():
    """Issue 21: 54.8 ms at 4 MiB on netem's two-nodes preset (farthest first: 91.5 ms)."""
    net, n = netem.PRESETS["two-nodes"], 4 << 20
    near = netem.model_time("all_reduce", "rabenseifner", n, 4, net)
    hier = cm.hierarchical_all_reduce_time(
        n, 4, net.intra.alpha, net.intra.beta, ranks_per_node=2, inter_alpha=net.inter.alpha,
        inter_beta=net.inter.beta, intra="ring",
    )  # fmt: skip
    far = netem.simulate_on_network(sch.rabenseifner_all_reduce(4, "farthest_first"), n, net).max()
    assert near == pytest.approx(hier) and near * 1e3 == pytest.approx(54.83, abs=0.01)
    assert far * 1e3 == pytest.approx(91.53, abs=0.01)


# ---------------------------------------------------------------------------
# NCCL's double binary tree.
# ---------------------------------------------------------------------------


def test_the_trees_are_ncclGetDtree():
    a, b = sch.double_binary_tree(14)
    # trees.cc draws 14 ranks: 0 -> 8 -> {4, 12}, 4 -> {2, 6}, 12 -> {10, 13}, 2 -> {1, 3}
    assert a[8] == 0 and a[4] == a[12] == 8 and a[10] == a[13] == 12 and a[1] == a[3] == 2
    # ... and mirrors it for an even count: 13 -> 5 (13 - 8), shifts it for an odd one
    assert b[5] == 13 and b[13] == -1
    a13, b13 = sch.double_binary_tree(13)
    assert b13[1] == -1 and b13[9] == 1  # rank r plays rank r - 1: root 1, its child 9


@pytest.mark.parametrize("p", [4, 6, 8, 12, 16])
def test_every_rank_is_interior_in_one_tree_and_a_leaf_in_the_other(p):
    a, b = sch.double_binary_tree(p)
    interior_a = {int(u) for u in a if u >= 0}
    interior_b = {int(u) for u in b if u >= 0}
    assert not interior_a & interior_b
    assert interior_a | interior_b == set(range(p))


@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 13, 16])
@pytest.mark.parametrize("blocks", [1, 3, 4])
def test_double_binary_tree_is_an_all_reduce_on_one_port(p, blocks):
    s = sch.double_binary_tree_all_reduce(p, blocks)
    sch.verify(s)
    for st in s.steps:  # one message out and one in per rank per step
        assert np.bincount(st.src).max() == 1 and np.bincount(st.dst).max() == 1
    half = s.steps[: len(s) // 2] if p & (p - 1) == 0 else s.steps
    assert any(np.all(st.reduce) for st in half)


@pytest.mark.parametrize("p", [4, 8, 16, 64, 256])
def test_double_binary_tree_steps_and_bandwidth(p):
    lg = int(np.log2(p))
    for blocks in (1, 4, 16):
        assert len(sch.double_binary_tree_all_reduce(p, blocks)) == 4 * blocks + 4 * lg - 6
    n = 2.0**26
    big = cm.cost(sch.double_binary_tree_all_reduce(p, 64), n)
    assert big.sent_per_rank.max() <= 2 * n + 1e-6  # full bandwidth: about what a ring sends
    # bandwidth term tends to 2nβ, latency grows with lg p, not p
    t = cm.double_binary_tree_all_reduce_time(n, p, 0.0, 1.0, blocks=64)
    assert 2 * n <= t <= 2 * n * (1 + (4 * lg) / (4 * 64))
    assert cm.double_binary_tree_all_reduce_time(0, p, 1.0, 0.0, blocks=4) == 4 * 4 + 4 * lg - 6


# ---------------------------------------------------------------------------
# Executed on a real 4-rank gloo group, against dist.all_reduce.
# ---------------------------------------------------------------------------

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/


def _schedules(p: int) -> list[sch.Schedule]:
    return [
        sch.direct_all_reduce(p),
        sch.double_binary_tree_all_reduce(p, 1),
        sch.double_binary_tree_all_reduce(p, 3),
        sch.rabenseifner_all_reduce(p),
        sch.rabenseifner_all_reduce(p, "farthest_first"),
        sch.hierarchical_all_reduce(p, 2),
        sch.hierarchical_all_reduce(p, 2, "ring"),
        sch.tree_all_reduce(p),
    ]


def _execute_new_algorithms(lengths: list[int]) -> list[str]:
    import torch
    import torch.distributed as dist

    me, p, failures = dist.get_rank(), dist.get_world_size(), []
    for s in _schedules(p):
        for n in lengths:
            for dtype in (torch.int64, torch.float32):
                x = torch.randn(n, generator=torch.Generator().manual_seed(n + me)).mul(100)
                x = x.to(dtype)
                ref = x.clone()
                dist.all_reduce(ref)
                got = sch.execute(s, x.clone())
                same = torch.equal(got, ref) if dtype == torch.int64 else torch.allclose(
                    got, ref, rtol=1e-5, atol=1e-4
                )  # fmt: skip
                if not same:
                    failures.append(f"{s.name} ({s.note}) n={n} {dtype} differs on rank {me}")
    return failures


def test_new_algorithms_execute_like_dist_all_reduce_on_4_gloo_ranks():
    lab = pytest.importorskip("labsupport")
    with lab.Cluster(4, backend="gloo", timeout=120) as c:
        results = c.run(_execute_new_algorithms, [0, 1, 3, 5, 8, 1001])
    assert [f for rank in results for f in rank] == []


def test_a_step_shows_its_columns():
    text = repr(sch.ring_all_reduce(3).steps[0])
    assert text == "Step(src=[0, 1, 2], dst=[1, 2, 0], start=[2, 0, 1], stop=[3, 1, 2], " \
        "reduce=[True, True, True])"  # fmt: skip
    assert "..." in repr(sch.ring_all_reduce(64).steps[0]) and "(64)" in repr(
        sch.ring_all_reduce(64).steps[0]
    )
