"""The sharding core (notebook 11): the formulas, the step model, and the ZeRO-2/3 wrapper."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import sharding
from labsupport.runtime.experiments import sharding_runs as runs

PSI = 1_000_000
CHECK = runs.Blocks(hidden=16, layers=3, batch=8, dtype=torch.float64)


# --------------------------------------------------------------------------- the formulas
@pytest.mark.parametrize("precision", ["fp32 AdamW", "mixed AdamW"])
def test_ddp_holds_16_psi_and_zero3_16_psi_over_p_in_either_precision(precision):
    assert sharding.total(PSI, 0, 8, precision) == 16 * PSI
    assert sharding.total(PSI, 3, 8, precision) == pytest.approx(16 * PSI / 8)


def test_each_stage_divides_one_more_part_by_p():
    p = 4
    assert sharding.model_states(PSI, 1, p) == {
        "parameters": 4 * PSI, "gradients": 4 * PSI, "optimizer state": 8 * PSI / p
    }  # fmt: skip
    assert sharding.model_states(PSI, 2, p)["gradients"] == 4 * PSI / p
    assert sharding.model_states(PSI, 2, p)["parameters"] == 4 * PSI
    # The paper's stage 1 in mixed precision: 2Ψ + 2Ψ + KΨ/N_d with K = 12.
    assert sharding.total(PSI, 1, p, "mixed AdamW") == pytest.approx(4 * PSI + 12 * PSI / p)


def test_zero3_sends_one_and_a_half_times_ddp_and_zero1_2_the_same():
    for p in (2, 4, 64):
        ddp = sharding.step_bytes(PSI, 0, p)
        assert ddp == pytest.approx(2 * (p - 1) / p * 4 * PSI)
        assert sharding.step_bytes(PSI, 1, p) == sharding.step_bytes(PSI, 2, p) == ddp
        assert sharding.step_bytes(PSI, 3, p) == pytest.approx(1.5 * ddp)
    assert [n for n, _ in sharding.collectives(3)] == ["all_gather", "all_gather", "reduce_scatter"]


# --------------------------------------------------------------------------- the step model
def test_without_communication_a_step_is_its_compute():
    for prefetch in (False, True):
        assert sharding.zero3_step(4, 1.0, 2.0, 0.0, 0.0, prefetch) == pytest.approx(12.0)


def test_prefetch_leaves_only_the_first_gather_and_last_scatter_when_they_fit():
    layers, f, b, g, r = 4, 1.0, 2.0, 0.4, 0.3
    assert sharding.zero3_step(layers, f, b, g, r, True) == pytest.approx(g + layers * (f + b) + r)
    # Without it every all-gather is waited for, in backward behind the reduce-scatter.
    assert sharding.zero3_step(layers, f, b, g, r, False) == pytest.approx(
        layers * (f + g) + g + b + (layers - 1) * (r + g + b) + r
    )
    assert sharding.hidden_by_prefetch(layers, f, b, g, r) > (2 * layers - 1) * g


def test_prefetch_cannot_hide_a_gather_longer_than_the_compute():
    slow = sharding.zero3_step(4, 1.0, 2.0, 3.0, 0.0, True)
    assert slow >= 3.0 + 3 * 3.0 + 1.0  # forward: each unit waits for its 3 s gather


# --------------------------------------------------------------------------- the wrapper
@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=2, timeout=90) as c:
        yield c


@pytest.mark.parametrize(
    "version",
    [sharding.ZeRO2, sharding.ZeRO3, functools.partial(sharding.ZeRO3, prefetch=False)],
    ids=["zero2", "zero3", "zero3 no prefetch"],
)
def test_the_wrappers_train_as_one_process_step_by_step(cluster, version):
    one = runs.baseline(CHECK, 3)
    for r in cluster.run(runs.train, version, CHECK, 3):
        loss, weight = runs.largest_gaps(r, one)
        assert loss < 1e-12 and weight < 1e-12


def test_the_comparison_can_fail(cluster):
    other = runs.baseline(runs.Blocks(hidden=16, layers=3, batch=8, dtype=torch.float64, lr=2e-3))
    r = cluster.run(runs.train, sharding.ZeRO3, CHECK, 3)[0]
    assert runs.largest_gaps(r, other)[1] > 1e-6


def _what_is_held(version):
    model = version(CHECK.make_model(seed=dist.get_rank()))
    x, y = runs._batch(CHECK, 0)
    out = model(x)
    after_forward = [u.full.untyped_storage().nbytes() > 0 for u in model.units]
    CHECK.loss(out, y).backward()
    after_backward = [u.full.untyped_storage().nbytes() > 0 for u in model.units]
    shards = [t.numel() for t in model.parameters()]
    grads = [t.grad.numel() for t in model.parameters()]
    return after_forward, after_backward, shards, grads


def test_zero3_frees_every_unit_but_the_last_after_forward_and_all_after_backward(cluster):
    forward, backward, shards, grads = cluster.run(_what_is_held, sharding.ZeRO3)[0]
    assert forward == [False, False, True] and backward == [False, False, False]
    unit = 16 * 16 + 16
    assert shards == grads == [unit // 2] * 3  # one shard of each unit, and its mean gradient
    forward, _, _, _ = cluster.run(
        _what_is_held, functools.partial(sharding.ZeRO3, prefetch=False)
    )[0]
    assert forward == [False, False, False]
    forward, backward, _, _ = cluster.run(_what_is_held, sharding.ZeRO2)[0]
    assert forward == backward == [True, True, True]  # ZeRO-2 keeps the parameters


def _accumulate():
    """Two backward passes per step (half a batch each) against one process doing the same."""
    torch.manual_seed(0)
    model = sharding.ZeRO3(CHECK.make_model(seed=dist.get_rank()))
    ref = CHECK.make_model()
    opts = [CHECK.make_optimizer(m) for m in (model, ref)]
    x, y = CHECK.global_batch(0)
    n, r, p = CHECK.batch // 2, dist.get_rank(), dist.get_world_size()
    for half in (slice(0, n), slice(n, 2 * n)):
        xs, ys = x[half], y[half]
        k = n // p
        CHECK.loss(model(xs[r * k : (r + 1) * k]), ys[r * k : (r + 1) * k]).backward()
        CHECK.loss(ref(xs), ys).backward()
    for o in opts:
        o.step()
    mine = runs.full_weights(model)
    return max((a - b).abs().max().item() for a, b in zip(mine, ref.parameters(), strict=True))


def test_gradient_accumulation_over_two_backward_passes(cluster):
    assert max(cluster.run(_accumulate)) < 1e-12


def test_parameters_outside_every_unit_are_refused():
    with lab.Cluster(world_size=1, timeout=60) as one:
        with pytest.raises(lab.RankError, match="parameters in no unit"):
            one.run(_wrap_first_block_only)


def _wrap_first_block_only():
    model = CHECK.make_model()
    sharding.ZeRO3(model, units=[model[0]])
