"""labsupport.parallel: each parallelism equals one process, and torch's own where torch has one.

Tensor parallelism against a dense MLP and against torch's ``parallelize_module``
(ColwiseParallel, RowwiseParallel on a CPU DeviceMesh over gloo); pipelines against one
process and against ``torch.distributed.pipelining``'s ScheduleGPipe and Schedule1F1B;
the MoE layer against one process; the layout search at 4096 NPUs.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

import labsupport as lab
from labsupport import parallel, topology

H, TOKENS = 8, 8


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=4, timeout=120) as c:
        yield c


def dense_mlp(seed: int = 0) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(seed)
    return nn.Linear(H, 4 * H), nn.Linear(4 * H, H)


def tp_vs_dense(sequence: bool) -> dict:
    """On each rank: the largest difference between the split MLP and the dense one."""
    fc1, fc2 = dense_mlp()
    torch.manual_seed(1)
    x = torch.randn(TOKENS, H)
    ref_x = x.clone().requires_grad_(True)
    ref = fc2(torch.nn.functional.gelu(fc1(ref_x)))
    ref.pow(2).sum().backward()
    mlp = (parallel.SequenceParallelMLP if sequence else parallel.ParallelMLP)(fc1, fc2)
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = x.chunk(world)[rank] if sequence else x
    mine = mine.clone().requires_grad_(True)
    out = mlp(mine)
    out.pow(2).sum().backward()
    want = ref.chunk(world)[rank] if sequence else ref
    grad_x = ref_x.grad.chunk(world)[rank] if sequence else ref_x.grad
    return {
        "out": (out - want).abs().max().item(),
        "grad_x": (mine.grad - grad_x).abs().max().item() if not sequence else None,
        "w1": (mlp.w1.grad - fc1.weight.grad.chunk(world, 0)[rank]).abs().max().item(),
        "w2": (mlp.w2.grad - fc2.weight.grad.chunk(world, 1)[rank]).abs().max().item(),
    }


@pytest.mark.parametrize("sequence", [False, True])
def test_tensor_parallel_mlp_equals_one_process(cluster, sequence):
    for rank, diff in enumerate(cluster.run(tp_vs_dense, sequence)):
        for key, value in diff.items():
            if value is not None:
                assert value < 1e-5, (rank, key, value)


def tp_vs_torch() -> float:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    fc1, fc2 = dense_mlp()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    seq = nn.Sequential(nn.Linear(H, 4 * H), nn.GELU(), nn.Linear(4 * H, H))
    seq[0].load_state_dict(fc1.state_dict())
    seq[2].load_state_dict(fc2.state_dict())
    theirs = parallelize_module(seq, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    ours = parallel.ParallelMLP(fc1, fc2)
    torch.manual_seed(1)
    x = torch.randn(TOKENS, H)
    a, b = ours(x), theirs(x)
    a.sum().backward()
    b.sum().backward()
    w1 = theirs[0].weight.grad.to_local()
    return max((a - b).abs().max().item(), (ours.w1.grad - w1).abs().max().item())


def test_tensor_parallel_equals_torchs_parallelize_module(cluster):
    assert max(cluster.run(tp_vs_torch)) < 1e-5


def pipeline_vs_one(schedule: str, micro: int) -> dict:
    rank, p = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(H, H), nn.Tanh()) for _ in range(p)]
    torch.manual_seed(1)
    x, y = torch.randn(micro * 2, H), torch.randn(micro * 2, H)
    whole = nn.Sequential(*[nn.Sequential(nn.Linear(H, H), nn.Tanh()) for _ in range(p)])
    whole.load_state_dict(nn.Sequential(*layers).state_dict())
    ref = nn.functional.mse_loss(whole(x), y)
    ref.backward()
    actions = parallel.SCHEDULES[schedule](rank, p, micro)
    losses, peak = parallel.run_stage(
        layers[rank], actions, (2, H), x.chunk(micro), y.chunk(micro), nn.functional.mse_loss
    )
    grad = (layers[rank][0].weight.grad - whole[rank][0].weight.grad).abs().max().item()
    return {"loss": sum(losses) if losses else None, "ref": ref.item(), "grad": grad, "peak": peak}


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_pipeline_equals_one_process_and_1f1b_holds_fewer_activations(cluster, schedule):
    micro = 8
    runs = cluster.run(pipeline_vs_one, schedule, micro)
    assert abs(runs[-1]["loss"] - runs[-1]["ref"]) < 1e-6
    for stage, run in enumerate(runs):
        assert run["grad"] < 1e-6, stage
        want = micro if schedule == "GPipe" else len(runs) - stage
        assert run["peak"] == want, (stage, run["peak"])


def pipeline_vs_torch(schedule: str, micro: int) -> float | None:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    rank, p = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(H, H), nn.Tanh()) for _ in range(p)]
    torch.manual_seed(1)
    x, y = torch.randn(micro * 2, H), torch.randn(micro * 2, H)
    stage = PipelineStage(layers[rank], rank, p, torch.device("cpu"))
    kind = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[schedule]
    losses: list = []
    sched = kind(stage, n_microbatches=micro, loss_fn=nn.functional.mse_loss)
    if rank == 0:
        sched.step(x)
    elif rank == p - 1:
        sched.step(target=y, losses=losses)
    else:
        sched.step()
    theirs = layers[rank][0].weight.grad.clone()
    torch.manual_seed(0)
    again = [nn.Sequential(nn.Linear(H, H), nn.Tanh()) for _ in range(p)]
    actions = parallel.SCHEDULES[schedule](rank, p, micro)
    parallel.run_stage(
        again[rank], actions, (2, H), x.chunk(micro), y.chunk(micro), nn.functional.mse_loss
    )
    # torch divides the summed gradients by the number of micro-batches (scale_grads=True)
    return (again[rank][0].weight.grad - theirs).abs().max().item()


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_pipeline_equals_torch_pipelining(cluster, schedule):
    assert max(cluster.run(pipeline_vs_torch, schedule, 4)) < 1e-5


def test_timeline_bubble_is_p_minus_1_over_m_for_both_schedules():
    for schedule in ("GPipe", "1F1B"):
        for p, m in ((4, 4), (4, 8), (2, 16)):
            done = parallel.timeline(schedule, p, m, 1.0, 2.0)
            makespan = max(end for _, end in done.values())
            ideal = m * 3.0
            assert makespan / ideal - 1 == pytest.approx(parallel.bubble(p, m)), (schedule, p, m)
    gp = [parallel.peak_activations(parallel.gpipe(s, 4, 8)) for s in range(4)]
    ofob = [parallel.peak_activations(parallel.one_f_one_b(s, 4, 8)) for s in range(4)]
    assert gp == [8, 8, 8, 8] and ofob == [4, 3, 2, 1]


def moe_vs_one() -> dict:
    torch.manual_seed(0)
    gate = nn.Linear(H, 8)
    experts = nn.ModuleList(nn.Linear(H, H) for _ in range(8))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    x = torch.randn(world * TOKENS, H)
    ref = parallel.moe_reference(x, gate, experts)
    ref.pow(2).sum().backward()
    moe = parallel.MoE(gate, experts)
    for m in moe.local:
        m.zero_grad()
    out = moe(x.chunk(world)[rank])
    out.pow(2).sum().backward()
    grads = [(m.weight.grad if m.weight.grad is not None else torch.zeros(H, H)) for m in moe.local]
    own = [experts[rank * 2 + j].weight.grad for j in range(2)]
    return {
        "out": (out - ref.chunk(world)[rank]).abs().max().item(),
        "received": moe.last_received,
        "same_grad": all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, own, strict=True)),
    }


def test_moe_equals_one_process_with_uneven_splits(cluster):
    runs = cluster.run(moe_vs_one)
    assert max(r["out"] for r in runs) < 1e-5
    # the expert gradients: on one process each expert sees every rank's tokens; the
    # MoE rank holding it sees the same tokens, so the gradients agree
    assert all(r["same_grad"] for r in runs)
    received = [sum(r["received"]) for r in runs]
    assert sum(received) == 4 * TOKENS and len(set(received)) > 1  # uneven
    assert parallel.imbalance(received) > 1


A2 = parallel.Cluster("Atlas 800T A2", topology.ascend_a2)
DGX = parallel.Cluster("DGX H100", topology.dgx_h100)


@pytest.mark.parametrize("cluster_", [A2, DGX], ids=["a2", "dgx"])
def test_best_layout_at_4096_is_tp_inside_dp_and_pp_across(cluster_):
    (_, lay), *_ = parallel.best(parallel.GPT3_175B, 4096, cluster_)
    assert lay.tp == cluster_.server and lay.dp > 1 and lay.pp > 1, lay
    rows = {r["class"]: r for r in parallel.step_time(parallel.GPT3_175B, lay, cluster_)}
    assert rows["TP all-reduce"]["where"] == "inside"
    assert rows["DP all-reduce"]["where"] == "across"
    assert rows["PP send/recv"]["where"] == "across"


def test_tp_across_servers_costs_more_than_inside():
    w = parallel.GPT3_175B
    inside = parallel.step_time(w, parallel.Layout(32, 8, 16), A2)[0]
    across = parallel.step_time(w, parallel.Layout(16, 16, 16), A2)[0]
    assert across["where"] == "both" and inside["where"] == "inside"
    # twice the TP calls' bytes per NPU are halved, yet the time per call grows more
    assert across["time"] / across["calls"] > 2 * inside["time"] / inside["calls"]


def test_placement_and_memory():
    assert parallel.placement(8, 1, 8) == (8, 1)  # TP 8: one server
    assert parallel.placement(4, 8, 8) == (1, 4)  # DP after TP 8: across
    assert parallel.placement(4, 2, 8) == (4, 1)  # DP 4 after TP 2: still inside
    assert parallel.placement(8, 2, 8) == (4, 2)
    lay = parallel.Layout(1, 8, 8)
    assert parallel.layout.model_states(parallel.GPT3_175B, lay) == pytest.approx(
        16 * parallel.GPT3_175B.params / 64
    )
    assert not parallel.layout.fits(parallel.GPT3_175B, parallel.Layout(64, 8, 1), 64e9)


def emulated_bubble(schedule: str, micro: int) -> float:
    from labsupport.runtime import emulator
    from labsupport.runtime.bench.timing import time_iterations

    rank, p = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layer = nn.Linear(H, H)
    x, y = torch.randn(micro, H), torch.randn(micro, H)
    actions = parallel.SCHEDULES[schedule](rank, p, micro)
    work = {"F": 0.01, "B": 0.02}

    def step(i):
        parallel.run_stage(
            layer, actions, (1, H), x.chunk(micro), y.chunk(micro), nn.functional.mse_loss,
            work=lambda kind: emulator.compute(work[kind]),
        )  # fmt: skip

    return time_iterations(step, 1, warmup=1).median / (micro * 0.03) - 1


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_bubble_measured_on_the_emulated_network_is_p_minus_1_over_m(schedule):
    # A stage's compute is charged before its result is sent: sent first, the next
    # stage would start at once and the bubble would vanish from the measurement.
    from labsupport import netem

    net = netem.Network(intra=netem.Link(latency=10e-6, bandwidth=1e9))
    with lab.Cluster(world_size=4, network=net, timeout=120) as c:
        measured = max(c.run(emulated_bubble, schedule, 4))
    assert measured == pytest.approx(parallel.bubble(4, 4), abs=0.05)
