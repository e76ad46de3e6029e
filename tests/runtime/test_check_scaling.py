"""labsupport.runtime.check.scaling and labsupport.scaling: right answers pass, wrong ones fail."""

from __future__ import annotations

import pytest
import torch

import labsupport as lab
from labsupport import compress, scaling
from labsupport.netem import Link, Network
from labsupport.runtime.check import scaling as grader
from labsupport.runtime.experiments import scaling_runs


# ----------------------------------------------------------------------------- efficiency
def test_definitions():
    assert scaling.strong_efficiency(100.0, 30.0, 4) == pytest.approx(100 / 120)
    assert scaling.weak_efficiency(100.0, 125.0) == pytest.approx(0.8)
    assert scaling.throughput_efficiency(9.0, 120.0, 32) == pytest.approx(0.4167, abs=1e-4)


def test_the_published_tables_last_row_is_41_7_percent():
    cards, throughput = grader.TABLES[0]
    assert grader.reference_efficiencies(cards, throughput)[-1] == pytest.approx(120 / (32 * 9))


def test_efficiency_grader_passes_the_reference_and_fails_wrong_formulas():
    assert grader.check_efficiencies(grader.reference_efficiencies).passed

    def per_card(cards, throughput):  # relative to one card even when the table starts at 2
        return [x / (c * throughput[0]) for c, x in zip(cards, throughput, strict=True)]

    def inverted(cards, throughput):
        return [c * throughput[0] / x for c, x in zip(cards, throughput, strict=True)]

    assert not grader.check_efficiencies(per_card).passed
    assert not grader.check_efficiencies(inverted).passed


def test_efficiency_grader_says_todo_for_a_stub():
    def stub(cards, throughput):
        raise NotImplementedError

    result = grader.check_efficiencies(stub)
    assert not result.passed and not result.implemented


def test_the_article_tables_recomputed(capsys):
    scaling.print_recomputed(scaling.ARTICLE_STRONG)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1].endswith("<- wrong") and "41.7%" in lines[-1]
    assert not any("wrong" in line for line in lines[:2])
    batches = list(scaling.ARTICLE_BATCH)
    rows = grader.reference_batch_table(batches, scaling.ARTICLE_BATCH[16][0])
    # the article's shares follow from its first row (constant communication) ...
    for (share, _), (printed, _) in zip(rows, scaling.ARTICLE_BATCH.values(), strict=True):
        assert share == pytest.approx(printed, abs=0.01)
    # ... but its efficiencies are not 1 - share
    assert rows[0][1] == pytest.approx(0.75) and scaling.ARTICLE_BATCH[16][1] == 0.68


def test_batch_grader_passes_the_reference_and_fails_wrong_answers():
    assert grader.check_batch_table(grader.reference_batch_table).passed

    def article_efficiency(batches, first_share):  # shares right, efficiency not 1 - share
        rows = grader.reference_batch_table(batches, first_share)
        return [(s, 1 - 1.3 * s) for s, _ in rows]

    def share_scales_with_batch(batches, first_share):  # share ∝ 1/b, not C/(C + kb)
        shares = [first_share * batches[0] / b for b in batches]
        return [(s, 1 - s) for s in shares]

    assert not grader.check_batch_table(article_efficiency).passed
    assert not grader.check_batch_table(share_scales_with_batch).passed


def test_model_step_and_break_even_batch():
    alpha, beta, n = 1e-3, 1 / 50e6, 1_000_000
    ring = 2 * 3 * alpha + 2 * 3 / 4 * n * beta
    assert scaling.model_step(0.01, n, 4, alpha, beta) == pytest.approx(0.01 + ring)
    assert scaling.model_step(0.01, n, 1, alpha, beta) == 0.01
    b = scaling.break_even_batch(1e-4, 0.002, n, 4, alpha, beta)
    assert 0.002 + 1e-4 * b == pytest.approx(ring)


def test_time_per_sample_fits_a_line():
    import time

    per_row, fixed = scaling_runs.time_per_sample(lambda b: time.sleep(0.002 + 1e-5 * b), [0, 500])
    assert per_row == pytest.approx(1e-5, rel=0.5)
    assert fixed == pytest.approx(0.002, abs=0.003)


# ----------------------------------------------------------------------------- top-k grader
@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(4, network=Network(inter=Link(20e-6, 5e9), ranks_per_node=1),
                     timeout=120) as c:  # fmt: skip
        yield c


def test_topk_grader_passes_the_reference(cluster):
    assert grader.check_topk_error_feedback(compress.topk_error_feedback, cluster).passed


def all_reduce_values(grad, residual, k):
    import torch.distributed as dist

    from labsupport import compress

    corrected = grad + residual
    indices, values = compress.topk(corrected, k)
    dist.all_reduce(values)  # the mistake: ranks picked different indices
    average = compress.sparse(indices, values / dist.get_world_size(), grad.numel())
    return average, corrected.index_fill(0, indices, 0.0)


def no_error_feedback(grad, residual, k):
    from labsupport import compress

    return compress.topk_allgather(grad, k), torch.zeros_like(residual)


def test_topk_grader_fails_the_all_reduce_version(cluster):
    result = grader.check_topk_error_feedback(all_reduce_values, cluster)
    assert not result.passed and "all-gather" in result.message


def test_topk_grader_fails_without_error_feedback(cluster):
    assert not grader.check_topk_error_feedback(no_error_feedback, cluster).passed


class RightTwiceThenNothing:
    """Right for the two graded calls, then sends nothing: only the convergence run can tell."""

    def __init__(self):
        self.calls = 0

    def __call__(self, grad, residual, k):
        from labsupport import compress

        self.calls += 1
        if self.calls <= 2:  # each run gets a fresh copy: the graded steps are right
            return compress.topk_error_feedback(grad, residual, k)
        return torch.zeros_like(grad), residual


def test_topk_grader_fails_when_training_does_not_converge(cluster):
    result = grader.check_topk_error_feedback(RightTwiceThenNothing(), cluster)
    assert not result.passed and "loss" in result.message


def test_topk_grader_says_todo_for_a_stub(cluster):
    def stub(grad, residual, k):
        raise NotImplementedError

    result = grader.check_topk_error_feedback(stub, cluster)
    assert not result.passed and not result.implemented


# ----------------------------------------------------------------------------- runs on ranks
def test_emulated_steps_run_on_the_first_ranks_only(cluster):
    out = cluster.run(scaling_runs.emulated_steps, 2, 0.01, 4000, 2)
    assert out[2:] == [None, None]
    assert all(0.01 <= t < 1.0 for t in out[:2])  # at least the emulated compute


def test_compute_and_comm_records_compute_barrier_and_all_reduce(cluster):
    from labsupport.runtime.experiments import workload

    cfg = workload.Config(in_features=16, hidden=32, layers=2, out_features=4)
    out = cluster.run(scaling_runs.compute_and_comm, 2, 8, cfg, 2)
    assert out[2:] == [None, None]
    assert {s.name for s in out[0]["spans"]} == {"compute", "barrier", "all_reduce"}
    assert out[0]["compute"] > 0 and out[0]["all_reduce"] > 0


def test_a_group_larger_than_the_world_is_refused(cluster):
    with pytest.raises(lab.RankError, match="between 1 and the world size 4"):
        cluster.run(scaling_runs.emulated_steps, 5, 0.0, 4)
