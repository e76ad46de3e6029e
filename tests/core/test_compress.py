"""labsupport.compress: the bytes formulas, top-k with error feedback, fp16, PowerSGD and hooks."""

from __future__ import annotations

import math

import pytest
import torch

import labsupport as lab
from labsupport import compress
from labsupport.netem import Link, Network
from labsupport.runtime.experiments import compression_runs, ddp_runs, workload

SHAPES = [(512, 64), (512,), (512, 512), (512,), (16, 512), (16,)]
FAST = Network(inter=Link(20e-6, 5e9), ranks_per_node=1)


# ----------------------------------------------------------------------------- formulas
def test_ring_and_gather_formulas():
    assert compress.ring_allreduce_bytes(1001, 4, 4) == 2 * 3 * 1001 * 4
    assert compress.ring_allreduce_bytes(1001, 4, 1) == 0
    assert compress.ring_allgather_bytes(10, 12, 4) == 4 * 3 * 10 * 12


def test_powersgd_split_follows_torchs_min_compression_rate():
    plain, ps, qs = compress.powersgd_split(SHAPES, rank=2)
    # the three matrices are worth compressing at rank 2, the biases are not
    assert (plain, ps, qs) == (512 + 512 + 16, 2 * (512 + 512 + 16), 2 * (64 + 512 + 512))
    # a 4 x 4 matrix at rank 2: (4 + 4) * 2 * 2 = 32 is not below 16, so it goes uncompressed
    assert compress.powersgd_split([(4, 4)], rank=2) == (16, 0, 0)
    # conv-like shapes are viewed as shape[0] x the rest
    assert compress.powersgd_split([(8, 3, 3, 3)], rank=1) == (0, 8, 27)


def test_step_bytes_of_each_method():
    n = sum(math.prod(s) for s in SHAPES)
    assert compress.step_bytes("none", SHAPES, 4) == 2 * 3 * n * 4
    assert compress.step_bytes("fp16", SHAPES, 4) == 2 * 3 * n * 2
    k = math.ceil(0.01 * n)
    assert compress.step_bytes("topk", SHAPES, 4, ratio=0.01) == 4 * 3 * k * 12
    assert compress.step_bytes("powersgd", SHAPES, 4, rank=1) < compress.step_bytes(
        "powersgd", SHAPES, 4, rank=4
    )


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: compress.topk_count(100, 0), "(0, 1]"),
        (lambda: compress.topk_count(100, 1.5), "(0, 1]"),
        (lambda: compress.step_bytes("zip", SHAPES, 4), "choose none, fp16"),
    ],
)
def test_bad_input_says_what_is_valid(call, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("]", r"\]")):
        call()


# ----------------------------------------------------------------------------- on ranks
def topk_on_ranks(numel: int, k: int) -> dict:
    """This rank's inputs, and what each top-k function returns for them."""
    import torch
    import torch.distributed as dist

    from labsupport import compress

    g = torch.Generator().manual_seed(7 + dist.get_rank())
    grad, residual = torch.randn(numel, generator=g), torch.randn(numel, generator=g) / 3
    average, new_residual = compress.topk_error_feedback(grad, residual, k)
    return {
        "grad": grad,
        "residual": residual,
        "average": average,
        "new_residual": new_residual,
        "gathered": compress.topk_allgather(grad, k),
        "wrong": compress.topk_allreduce_wrong(grad, k),
    }


def reference(grads: list[torch.Tensor], k: int) -> torch.Tensor:
    """Every rank's top-k as a dense tensor, averaged."""
    dense = []
    for g in grads:
        idx = g.abs().topk(k).indices
        dense.append(torch.zeros_like(g).index_add_(0, idx, g[idx]))
    return torch.stack(dense).mean(0)


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_topk_with_error_feedback_on_1_to_4_ranks(p):
    numel, k = 50, 5
    with lab.Cluster(p, backend="gloo", timeout=60, standby=False) as cluster:
        out = cluster.run(topk_on_ranks, numel, k)
    corrected = [o["grad"] + o["residual"] for o in out]
    expected = reference(corrected, k)
    for rank, o in enumerate(out):
        assert torch.allclose(o["average"], expected, atol=1e-6), f"average on rank {rank}"
        sent = corrected[rank] - o["new_residual"]
        assert torch.count_nonzero(sent) == k  # exactly k entries left the rank ...
        idx = corrected[rank].abs().topk(k).indices  # ... the k largest of grad + residual
        assert torch.equal(o["new_residual"][idx], torch.zeros(k))
        assert torch.allclose(o["gathered"], reference([x["grad"] for x in out], k), atol=1e-6)
    if p == 1:
        assert torch.allclose(out[0]["wrong"], out[0]["gathered"])
    else:  # the ranks pick different indices: all-reducing the values is wrong
        assert not torch.allclose(out[0]["wrong"], out[0]["gathered"], atol=1e-3)


def error_feedback_conserves(steps: int) -> float:
    """Largest |Σ grads - (Σ sent + residual)| over the steps of TopK on one rank."""
    import torch
    import torch.distributed as dist

    from labsupport import compress

    topk = compress.TopK(ratio=0.1)
    g = torch.Generator().manual_seed(dist.get_rank())
    total_grad, total_sent = torch.zeros(40), torch.zeros(40)
    for _ in range(steps):
        grad = torch.randn(40, generator=g)
        before = grad + topk.residual if topk.residual is not None else grad.clone()
        topk(grad)
        total_grad += grad
        total_sent += before - topk.residual
    return (total_grad - total_sent - topk.residual).abs().max().item()


@pytest.fixture(scope="module")
def netem_cluster():
    with lab.Cluster(4, network=FAST, timeout=120) as cluster:
        cluster.run(ddp_runs.use_threads)
        yield cluster


def test_error_feedback_loses_nothing(netem_cluster):
    assert max(netem_cluster.run(error_feedback_conserves, 5)) < 1e-5


def fp16_bytes(numel: int) -> tuple[int, float]:
    import torch
    import torch.distributed as dist

    from labsupport import compress
    from labsupport.runtime import emulator

    x = torch.randn(numel, generator=torch.Generator().manual_seed(dist.get_rank()))
    exact = x.clone()
    dist.all_reduce(exact)
    before = emulator.traffic()["bytes_sent"]
    half = compress.fp16_allreduce(x)
    sent = torch.tensor([emulator.traffic()["bytes_sent"] - before])
    dist.all_reduce(sent)
    return int(sent.item()), ((half - exact / 4).norm() / (exact / 4).norm()).item()


def test_fp16_sends_half_the_bytes_exactly_with_a_small_error(netem_cluster):
    sent, error = netem_cluster.run(fp16_bytes, 1001)[0]  # 1001 does not split evenly
    assert sent == compress.ring_allreduce_bytes(1001, 2, 4)
    assert error < 1e-3


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("none", {}),
        ("fp16", {}),
        ("bf16", {}),
        ("powersgd", {"rank": 2}),
        ("topk", {"ratio": 0.01}),
    ],
)
def test_counted_bytes_equal_the_formula(netem_cluster, method, options):
    cfg = workload.Config(in_features=32, hidden=64, layers=3, out_features=8, batch=16)
    result = netem_cluster.run(compression_runs.train, method, 4, cfg, **options)[0]
    formula = compress.step_bytes("fp16" if method == "bf16" else method, result["shapes"], 4,
                                  buckets=result["buckets"], **options)  # fmt: skip
    assert result["bytes"][3] == formula  # after PowerSGD's 2 uncompressed steps
    assert all(math.isfinite(x) for x in result["loss"])


def powersgd_matches_its_approximation() -> tuple[float, float]:
    """Relative error of rank-8 PowerSGD of an exactly rank-2 average after 2 warm steps."""
    import torch
    import torch.distributed as dist

    from labsupport import compress

    shared = torch.Generator().manual_seed(0)
    common = torch.randn(30, 2, generator=shared) @ torch.randn(2, 20, generator=shared)
    psgd = compress.PowerSGD(rank=2, error_feedback=False)
    grad = common * (1 + dist.get_rank())  # every rank a multiple of the same rank-2 matrix
    errors = [((psgd(grad) - common * 2.5).norm() / (common * 2.5).norm()).item() for _ in "ab"]
    return errors[0], errors[1]


def test_powersgd_recovers_a_low_rank_average_exactly(netem_cluster):
    first, second = netem_cluster.run(powersgd_matches_its_approximation)[0]
    assert second < 1e-4  # a rank-2 average is found exactly by a rank-2 power step


def bf16_refused() -> str:
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    try:
        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    except TypeError as err:
        return str(err)
    return "accepted"


def test_torchs_bf16_hook_is_refused_on_gloo(netem_cluster):
    assert "NCCL" in netem_cluster.run(bf16_refused)[0]


def test_unknown_method_is_refused_by_name(netem_cluster):
    with pytest.raises(lab.RankError, match="unknown method 'zip'"):
        netem_cluster.run(compression_runs.train, "zip", 1)


def test_compressors_keep_the_gradients_device(monkeypatch):
    """topk.sparse and PowerSGD build their tensors on the gradient's device (meta here)."""
    import importlib

    import torch.distributed as dist

    topk_module = importlib.import_module("labsupport.compress.topk")
    from labsupport.compress.powersgd import PowerSGD

    monkeypatch.setattr(dist, "all_reduce", lambda tensor, *args, **kwargs: None)
    monkeypatch.setattr(dist, "get_world_size", lambda *args: 1)
    out = topk_module.sparse(torch.tensor([1]).to("meta"), torch.tensor([2.0]).to("meta"), 5)
    assert out.device.type == "meta"
    assert PowerSGD(rank=2)(torch.randn(6, 4).to("meta")).device.type == "meta"
