"""labsupport.netem: the link model on paper, values equal to gloo's, time that is really paid."""

from __future__ import annotations

import math

import psutil
import pytest

import labsupport as lab
from labsupport import costmodel, netem
from labsupport.netem import Link, Network
from labsupport.runtime import emulator
from labsupport.schedules import hierarchical_all_reduce, verify

A, B = 1e-3, 1e6  # 1 ms, 1 MB/s: a 1000-byte message takes 2 ms on an idle link
MSG = 1000


def two_nodes(rpn: int = 2) -> Network:
    return Network(intra=Link(A, B), inter=Link(A, B), ranks_per_node=rpn)


# ----------------------------------------------------------------------------- the link model
def test_one_message_takes_latency_plus_size_over_bandwidth():
    clock = two_nodes().clock(4)
    assert clock.message(0, 1, MSG, now=5.0) == pytest.approx(5.0 + A + MSG / B)
    assert Link(A, B).time(0) == A


def test_two_messages_on_one_link_queue():
    clock = Network(intra=Link(A, B)).clock(4)
    first = clock.message(0, 1, MSG, now=0.0)
    second = clock.message(0, 1, MSG, now=0.0)
    assert second == pytest.approx(2 * first)
    # after the link has gone idle, a message pays only its own time again
    assert clock.message(0, 1, MSG, now=10.0) == pytest.approx(10.0 + first)


def test_a_shared_nic_queues_where_two_intra_node_links_do_not():
    # Intra-node (a full mesh): rank 0 sends to ranks 1 and 2 at once on two links.
    mesh = Network(intra=Link(A, B)).clock(4)
    assert mesh.message(0, 1, MSG, 0.0) == pytest.approx(mesh.message(0, 2, MSG, 0.0))
    # Between nodes (one rank per node): both messages leave through rank 0's one NIC.
    nics = Network(inter=Link(A, B), ranks_per_node=1).clock(4)
    t1, t2 = nics.message(0, 1, MSG, 0.0), nics.message(0, 2, MSG, 0.0)
    assert t2 == pytest.approx(2 * t1)
    # ... and two senders into one receiver queue on its incoming NIC.
    nics = Network(inter=Link(A, B), ranks_per_node=1).clock(4)
    t1, t2 = nics.message(1, 0, MSG, 0.0), nics.message(2, 0, MSG, 0.0)
    assert t2 == pytest.approx(2 * t1)


def test_links_are_full_duplex():
    for net in (Network(intra=Link(A, B)), Network(inter=Link(A, B), ranks_per_node=1)):
        clock = net.clock(2)
        there, back = clock.message(0, 1, MSG, 0.0), clock.message(1, 0, MSG, 0.0)
        assert there == back == pytest.approx(A + MSG / B)


@pytest.mark.parametrize(
    "algorithm, closed_form",
    [
        ("ring", costmodel.ring_all_reduce_time),
        ("recursive_doubling", costmodel.recursive_doubling_all_reduce_time),
        ("rabenseifner", costmodel.rabenseifner_all_reduce_time),
        ("tree", costmodel.tree_all_reduce_time),
    ],
)
@pytest.mark.parametrize("p", [2, 4, 8])
def test_the_model_of_a_one_port_network_is_the_alpha_beta_closed_form(algorithm, closed_form, p):
    net = netem.PRESETS["slow-ethernet"]
    n = 64 * 1024 * p
    alpha, beta = net.inter.alpha, net.inter.beta
    assert netem.model_time("all_reduce", algorithm, n, p, net) == pytest.approx(
        closed_form(n, p, alpha, beta)
    )


def test_hierarchical_schedule_computes_an_all_reduce_and_matches_its_closed_form():
    for p, k in [(4, 2), (8, 2), (8, 4), (6, 3), (4, 1), (4, 4)]:
        verify(hierarchical_all_reduce(p, k))
    net = netem.PRESETS["two-nodes"]
    n = 1 << 20
    expected = costmodel.hierarchical_all_reduce_time(
        n, 4, net.intra.alpha, net.intra.beta, ranks_per_node=2,
        inter_alpha=net.inter.alpha, inter_beta=net.inter.beta,
    )  # fmt: skip
    assert netem.model_time("all_reduce", "hierarchical", n, 4, net) == pytest.approx(expected)
    # and on two nodes it beats a flat ring, whose slowest links are the NICs
    assert expected < netem.model_time("all_reduce", "ring", n, 4, net)


def test_hierarchical_with_one_rank_per_node_runs_the_plain_ring_and_nothing_more():
    # slow-ethernet has one rank per node: no intra-node phase, the same plan as the ring
    from labsupport.runtime.emulator.algorithms import _plan

    ring, hier = (netem.schedule_for("all_reduce", a, 4, 1) for a in ("ring", "hierarchical"))
    assert len(hier.steps) == len(ring.steps) == 6
    assert all(_plan(hier, r) == _plan(ring, r) for r in range(4))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: Link(-1e-3, 1e6), "latency must be >= 0"),
        (lambda: Link(1e-3, 0), "bandwidth must be > 0"),
        (lambda: Link(math.nan, 1e6), "finite"),
        (lambda: Network(intra=Link(A, B), ranks_per_node=0), "positive integer"),
        (lambda: Network(intra=Link(A, B), algorithm="fastest"), "ring, tree, recursive_doubling"),
        (lambda: Network(), "at least one link"),
        (lambda: netem.resolve("infiniband"), "slow-ethernet, one-node, two-nodes"),
    ],
)
def test_bad_links_networks_and_names_say_what_is_valid(make, words):
    with pytest.raises(ValueError, match=words):
        make()


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"network": two_nodes(3)}, "ranks_per_node=3 does not divide the world size 4"),
        ({"network": "infiniband"}, "choose one of: slow-ethernet"),
        ({"network": "one-node", "env": {"LAB_ALGO": "fastest"}}, "choose one of: ring"),
        ({"network": "one-node", "backend": "nccl"}, "runs over gloo"),
        ({"network": Network(intra=Link(A, B), ranks_per_node=2)}, "need an inter-node link"),
    ],
)
def test_cluster_rejects_a_bad_network_before_any_process_starts(kwargs, words):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ValueError, match=words):
        lab.Cluster(4, **kwargs)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_ranks_magic_rejects_an_unknown_preset_before_starting():
    from labsupport.runtime.magics import cluster_for

    with pytest.raises(ValueError, match="choose one of: slow-ethernet"):
        cluster_for("-n 2 --network infiniband")


def test_network_survives_the_trip_to_the_ranks_as_json():
    net = Network(intra=Link(2e-4, 4e8), inter=Link(1e-3, 5e7), ranks_per_node=2, algorithm="tree")
    assert Network.from_json(net.to_json()) == net
    assert net.scaled(latency=10, bandwidth=0.1).inter == Link(1e-2, 5e6)


def test_links_and_networks_read_as_sentences_and_repr_as_exact_code():
    from IPython.lib.pretty import pretty

    net = netem.Network(
        intra=netem.Link(200e-6, 400e6), inter=netem.Link(1e-3, 82_855_234.5), ranks_per_node=2
    )
    assert str(net.inter) == "1 ms, 82.9 MB/s"
    assert str(net) == (
        "intra-node 200 µs, 400 MB/s; inter-node 1 ms, 82.9 MB/s; 2 ranks per node; "
        "algorithm from LAB_ALGO or ring"
    )
    assert pretty(net) == f"Network: {net}"  # a cell that ends with a network
    assert repr(netem.PRESETS["slow-ethernet"]) == (
        "Network(inter=Link(latency=1e-3, bandwidth=50e6), ranks_per_node=1)"
    )
    assert eval(repr(net), vars(netem)) == net


def test_the_setters_return_nothing_to_show():
    state = emulator.state.STATE
    saved = {k: getattr(state, k) for k in ("network", "clock", "algorithm", "world_size")}
    try:
        assert emulator.set_algorithm("tree") is None
        assert emulator.set_network(netem.PRESETS["slow-ethernet"]) is None
        assert emulator.current_network() == netem.PRESETS["slow-ethernet"]
    finally:
        for key, value in saved.items():
            setattr(state, key, value)
