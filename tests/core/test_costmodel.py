"""The alpha-beta-gamma model: schedules costed step by step agree with the closed forms."""

import inspect

import numpy as np
import pytest

from labsupport import costmodel as cm
from labsupport import schedules as sch

ALPHA, BETA, GAMMA = 7e-6, 3e-10, 1e-10
N = 12_345_678.0  # bytes; deliberately not a multiple of p


@pytest.mark.parametrize("name", sorted(cm.CLOSED_FORMS))
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 64])
@pytest.mark.parametrize("ports", cm.PORTS)
def test_schedule_cost_matches_closed_form(name, p, ports):
    """For every world size a schedule accepts, folded or not, on one port or a full mesh."""
    if not sch.supports(name, p):
        pytest.skip("power-of-two world sizes only")
    form = cm.CLOSED_FORMS[name]
    kw = {"ports": ports} if "ports" in inspect.signature(form).parameters else {}
    got = cm.schedule_time(sch.BUILDERS[name](p), N, ALPHA, BETA, GAMMA, ports=ports)
    assert got == pytest.approx(form(N, p, ALPHA, BETA, GAMMA, **kw), rel=1e-12, abs=1e-15)


def test_a_schedule_and_its_cost_formula_never_share_a_name():
    """Issue 25: schedules.X builds the schedule, costmodel.X_time is its closed form."""
    assert set(cm.CLOSED_FORMS) == set(sch.BUILDERS)
    for name, form in cm.CLOSED_FORMS.items():
        assert form.__name__ == f"{name}_time" and getattr(cm, f"{name}_time") is form
        assert not hasattr(cm, name), f"costmodel.{name} would shadow schedules.{name}"
    assert cm.hierarchical_all_reduce_time.__name__.endswith("_time")


def test_folded_rabenseifner_is_hccls_rhd_cost():
    """hicann/hccl RHD.md: (2⌊lg p⌋+2)α + (2(p'-1)/p'+2)nβ + ((p'-1)/p'+1)nγ, p' = 2^⌊lg p⌋."""
    for p in (3, 5, 6, 7, 12, 24):
        q = 2 ** int(np.log2(p))
        hccl = (2 * np.log2(q) + 2) * ALPHA + (2 * (q - 1) / q + 2) * N * BETA
        hccl += ((q - 1) / q + 1) * N * GAMMA
        assert cm.rabenseifner_all_reduce_time(N, p, ALPHA, BETA, GAMMA) == pytest.approx(hccl)


def test_at_6_ranks_the_ring_beats_folded_rabenseifner_for_big_messages():
    """Issue 21, item 4: p = 6, 64 MiB, α = 1 ms, 50 MB/s: ring 2.25 s, Rabenseifner 4.70 s."""
    n, a, b = 64 * 2**20, 1e-3, 1 / 50e6
    assert cm.ring_all_reduce_time(n, 6, a, b) == pytest.approx(2.247, abs=1e-3)
    assert cm.rabenseifner_all_reduce_time(n, 6, a, b) == pytest.approx(4.703, abs=1e-3)
    # ... while for powers of two Rabenseifner never loses to the ring
    assert cm.rabenseifner_all_reduce_time(n, 8, a, b) < cm.ring_all_reduce_time(n, 8, a, b)


def test_ports_must_be_one_or_all():
    with pytest.raises(ValueError, match="one"):
        cm.cost(sch.ring_all_reduce(4), N).time(ALPHA, BETA, ports="two")
    with pytest.raises(ValueError, match="all"):
        cm.direct_all_reduce_time(N, 4, ALPHA, BETA, ports="many")


@pytest.mark.parametrize("p", [1, 2, 3, 4, 7, 8])
def test_ring_all_reduce_sends_2_p_minus_1_over_p_n_per_rank(p):
    c = cm.cost(sch.ring_all_reduce(p), N)
    assert c.steps == 2 * (p - 1)
    np.testing.assert_allclose(c.sent_per_rank, 2 * (p - 1) / p * N)
    np.testing.assert_allclose(c.received_per_rank, 2 * (p - 1) / p * N)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_naive_all_reduce_loads_the_root_link(p):
    c = cm.cost(sch.naive_all_reduce(p), N)
    # The root receives p-1 buffers and sends p-1: 2(p-1)·n bytes on its link.
    assert c.sent_per_rank[0] + c.received_per_rank[0] == pytest.approx(2 * (p - 1) * N)
    np.testing.assert_allclose(c.sent_per_rank[1:] + c.received_per_rank[1:], 2 * N)


@pytest.mark.parametrize("numel", [0, 1, 5, 13, 1000])
@pytest.mark.parametrize("p", [3, 4])
def test_exact_chunking_counts_whole_elements(numel, p):
    # Every element crosses p-1 links in each phase, whatever the chunk sizes.
    c = cm.cost(sch.ring_all_reduce(p), numel * 4, itemsize=4)
    assert c.sent.sum() == 2 * (p - 1) * numel * 4
    assert np.all(c.sent % 4 == 0)


def test_chunk_bytes_matches_tensor_split():
    torch = pytest.importorskip("torch")
    sizes = cm.chunk_bytes(10 * 8, 4, itemsize=8)
    want = [t.numel() * 8 for t in torch.arange(10).tensor_split(4)]
    assert sizes.tolist() == want
    with pytest.raises(ValueError, match="whole number"):
        cm.chunk_bytes(10, 4, itemsize=4)


def test_latency_term_counts_messages_not_steps():
    # The naive root handles p-1 messages in each of its two steps.
    p = 5
    c = cm.cost(sch.naive_all_reduce(p), 0.0)
    assert c.time(alpha=1.0, beta=0.0) == 2 * (p - 1)
    assert cm.cost(sch.ring_all_reduce(p), 0.0).time(alpha=1.0, beta=0.0) == 2 * (p - 1)


def test_whole_buffer_ring_moves_p_over_2_times_more_than_the_chunked_ring():
    p = 8
    whole = cm.whole_buffer_ring_all_reduce_time(N, p, 0.0, 1.0)
    chunked = cm.ring_all_reduce_time(N, p, 0.0, 1.0)
    assert whole / chunked == pytest.approx(p / 2)


@pytest.mark.parametrize("name", ["recursive_doubling_all_reduce", "rabenseifner_all_reduce"])
@pytest.mark.parametrize("p", [3, 6, 7, 12])
def test_folding_extra_ranks_costs_two_whole_buffer_steps(name, p):
    q = 1 << (p.bit_length() - 1)  # the power of two the extra ranks fold into
    got = cm.schedule_time(sch.BUILDERS[name](p), N, ALPHA, BETA, GAMMA)
    inner = cm.CLOSED_FORMS[name](N, q, ALPHA, BETA, GAMMA)
    assert got == pytest.approx(inner + 2 * ALPHA + 2 * N * BETA + N * GAMMA, rel=1e-12)


# ---------------------------------------------------------------------------
# Measurements: busbw factors and the α-β fit live here, below bench and viz.
# ---------------------------------------------------------------------------


def test_plots_do_not_import_the_benchmark():
    """viz and bench both import costmodel; neither needs the other (no import cycle)."""
    import subprocess
    import sys

    code = (
        "import sys, labsupport.runtime.viz.bandwidth, labsupport.costmodel as cm; "
        "print(sorted(m for m in sys.modules if m.startswith('labsupport.runtime.bench')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_benchmark_reexports_the_cost_model():
    from labsupport.runtime import bench
    from labsupport.runtime.bench.collectives import busbw_factor

    assert busbw_factor is cm.busbw_factor is bench.busbw_factor
    assert bench.fit_alpha_beta is cm.fit_alpha_beta and bench.AlphaBetaFit is cm.AlphaBetaFit
    assert cm.fit_model("all_reduce", "ring") is cm.ring_all_reduce_time


def test_busbw_factor_of_an_unknown_collective_says_which_exist():
    assert cm.busbw_factor("all_reduce", 16) == pytest.approx(1.875)
    with pytest.raises(ValueError, match="all_gather"):
        cm.busbw_factor("allreduce", 4)


def test_fit_recovers_alpha_and_beta_from_exact_ring_times():
    rows = [
        {"collective": "all_reduce", "size": s, "nranks": p, "in_place": True,
         "time_us": cm.ring_all_reduce_time(s, p, 50e-6, 1e-9) * 1e6}
        for s in (1e3, 1e5, 1e7) for p in (2, 4)
    ]  # fmt: skip
    fit = cm.fit_alpha_beta(rows)
    assert fit.alpha == pytest.approx(50e-6) and fit.beta == pytest.approx(1e-9)
    assert fit.residual < 1e-9 and fit.crossover(2) == pytest.approx(50e-6 * 2 / (1e-9 * 1))


def test_a_fit_prints_alpha_in_a_unit_that_fits():
    fit = cm.AlphaBetaFit("all_reduce", "ring", 1.09e-3, 2.53e-9, 0.263, 3)
    assert str(fit) == (
        "all_reduce (ring): α = 1.09 ms, β = 2.53 ns/B (1/β = 0.395 GB/s), "
        "RMS residual 26.3% over 3 points"
    )
