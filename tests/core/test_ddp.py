"""labsupport.ddp: the hand-written versions behave as torch's DDP and ZeroRedundancyOptimizer do.

Each case here is a bug an independent DDP test suite found in the course's earlier
versions (frozen parameters and buffers never copied from rank 0, an unused parameter
silently stopping its bucket, bucket sizes in bytes, buckets sent in ready order, no
no_sync, no parameter groups), run against torch's own classes where they exist.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch
import torch.distributed as dist
from torch import nn

import labsupport as lab
from labsupport import ddp
from labsupport.runtime import capstone, trace
from labsupport.runtime.check.dataparallel import GPT_GRADE, GRADE, expected_buckets
from labsupport.runtime.experiments import ddp_runs, workload

UNUSED = dataclasses.replace(GRADE, unused=True)
WRAPPERS = ["naive", "flat", "overlap", "bucket", "torch"]


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=2, timeout=90) as c:
        c.run(ddp_runs.use_threads)
        yield c


def same(cluster, parallel, cfg=GRADE, steps=3, **kwargs):
    """None if ``parallel`` trains as one process does, element by element; else what differs."""
    return capstone.first_divergence(
        cluster.run(capstone.compare_steps, parallel, cfg, steps, **kwargs)
    )


# ------------------------------------------------------------------ the rule, no ranks
def test_bucket_assignment_is_torchs_own():
    sizes = [400, 400, 400, 1200, 200]
    tensors = [torch.empty(n // 4) for n in sizes]
    for cap_mb in (1000 / 2**20, 1 / 2**20, 4000 / 2**20, ddp.ONE_BUCKET, None):
        first, cap = ddp.bucket_caps(cap_mb)
        limits = [min(int(first), 2**62), min(int(cap), 2**62)] if math.isfinite(first) else [2**62]
        want, _ = dist._compute_bucket_assignment_by_size(tensors, limits)
        assert ddp.assign_buckets(sizes, cap_mb) == want, cap_mb
    assert ddp.assign_buckets(sizes, 1000 / 2**20) == [[0, 1, 2], [3], [4]]  # a cap is no maximum


def test_use_threads_is_one_per_rank_on_an_emulated_network(monkeypatch):
    # The emulated clock charges the calling thread's CPU time: a second intra-op
    # thread's share of a matrix product would cost nothing. Off the emulated
    # network, cores // ranks.
    from labsupport.runtime.emulator import clock

    threads = torch.get_num_threads()
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    try:
        assert ddp_runs.use_threads(4) == 4 and torch.get_num_threads() == 4
        clock.install()
        try:
            assert ddp_runs.use_threads(4) == 1 and torch.get_num_threads() == 1
        finally:
            clock.uninstall()
    finally:
        torch.set_num_threads(threads)


def test_default_cap_is_25_mib_with_a_1_mib_first_bucket_and_bad_caps_are_refused():
    assert ddp.bucket_caps(None) == (2**20, 25 * 2**20)
    assert ddp.bucket_caps(2) == (2 * 2**20, 2 * 2**20)  # a cap you choose: every bucket
    assert ddp.assign_buckets([2**20, 2**20, 2**20], None) == [[0], [1, 2]]
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="positive number of MiB"):
            ddp.bucket_caps(bad)
    with pytest.raises(ValueError, match="choose one of"):
        ddp_runs.version_factory("fast", None)


def test_uneven_batch_is_a_clear_error():
    with pytest.raises(ValueError, match="multiple of 3"):
        workload.Config(batch=8).local_batch(0, 0, 3)


def test_the_model_predicts_optimizer_overlap_and_its_bounds():
    buckets, model = [1000, 1000, 1000], ddp.StepModel(0.01, 0.02, 0.006, 4, 1e-4, 1e-6)
    assert model.all_reduce(1000) == pytest.approx(0.0021)
    plain = ddp.predict_step(buckets, model)
    overlapped = ddp.predict_step(buckets, model, optimizer_overlap=True)
    # each all-reduce 2.1 ms; the last ends 2.1 ms after backward, then the whole optimizer
    assert plain == pytest.approx(0.01 + 0.02 + 0.0021 + 0.006)
    # the first two buckets' optimizer shares (4 ms) run while the last bucket travels
    assert overlapped == pytest.approx(0.01 + 0.02 + 0.006)
    # gradients that arrive in lumps (all at backward's end): nothing hides
    late = ddp.predict_step(buckets, model, ready=[0.03, 0.03, 0.03])
    assert late == pytest.approx(0.03 + 3 * 0.0021 + 0.006)
    # the first two buckets end before backward does, the last after: two thirds hide
    assert ddp.hidden_fraction(buckets, model) == pytest.approx(2 / 3)
    b = ddp.bounds(model, comm=0.05, last=0.005)
    assert b == {"ideal": pytest.approx(0.05), "ddp bound": pytest.approx(0.066)}
    # without overlap: compute, then one all-reduce per tensor
    assert ddp.predict_naive(buckets, model) == pytest.approx(0.036 + 3 * 0.0021)


def test_the_step_model_is_one_record():
    model = ddp.StepModel(0.01, 0.02, 0.006, 4, 1e-4, 1e-6)
    with pytest.raises(TypeError):
        ddp.predict_step([1000], 0.01, 0.02, 0.006, 4, 1e-4, 1e-6)  # the six floats: gone
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.alpha = 0.0


def test_the_predicted_timeline_and_its_slider_redraw_for_each_cap():
    import matplotlib

    matplotlib.use("Agg")
    from labsupport.runtime.viz.ddp import bucket_slider, plot_bucket_choice, plot_predicted_step

    model = workload.Config(layers=3, hidden=64).make_model()
    args = ddp.StepModel(0.01, 0.02, 0.001, 4, 1e-4, 1e-8)
    ax = plot_predicted_step(ddp.bucket_sizes(model, 1e-6), args)
    assert "6 buckets" in ax.get_title()
    fig = plot_bucket_choice(lambda cap: ddp.bucket_sizes(model, cap), [1e-6, 1.0], args, 1.0)
    timeline, curve = fig.axes
    assert "1 bucket:" in timeline.get_title()
    marked = curve.lines[-1].get_xydata()  # the chosen cap, on the model's curve
    assert marked[0, 0] == 1024 and marked[0, 1] == pytest.approx(curve.lines[0].get_ydata()[1])
    box = bucket_slider(lambda cap: ddp.bucket_sizes(model, cap), [1e-6, 1.0], args, value=1.0)
    slider, picture = box.children
    first = picture.value
    slider.value = 1e-6
    assert picture.value != first and picture.value[:4] == b"\x89PNG"


# ------------------------------------------------------------------ every version, every case
@pytest.mark.parametrize("version", [*WRAPPERS, "zero1"])
def test_tied_frozen_buffer_and_seeds_per_rank_train_as_one_process(cluster, version):
    """Each rank seeds its own model; rank 0's parameters (frozen too) and buffer win.

    ZeRO-1 is an optimizer: it makes the parameters equal, not the buffers (torch's
    ZeroRedundancyOptimizer neither; DDP does that), so its model has a constant buffer.
    """
    cfg = dataclasses.replace(GRADE, buffer=False) if version == "zero1" else GRADE
    assert same(cluster, version, cfg, bucket_cap_mb=0.001) is None
    assert same(cluster, version, GPT_GRADE, bucket_cap_mb=0.05) is None


def test_the_comparison_can_fail(cluster):
    """Local gradients alone (no communication) are caught at the first step."""

    class Nothing(ddp.DDPBase):
        def wait_for_gradients(self):
            pass

    found = same(cluster, Nothing)
    assert found["step"] == 0 and found["what"] == "gradients"


def test_without_the_broadcast_the_ranks_start_apart(cluster):
    class NoBroadcast(ddp.Bucketed):
        def broadcast_module_states(self):
            pass

    found = same(cluster, NoBroadcast)
    assert found["what"] == "initial weights" and "frozen.weight" in found["names"]
    assert "scale" in found["names"]  # the buffer too


@pytest.mark.parametrize("version", ["naive", "overlap", "bucket"])
def test_an_unused_parameter_is_an_error_that_names_it(cluster, version):
    with pytest.raises(lab.RankError, match=r"spare\.weight"):
        same(cluster, version, UNUSED, 1)
    assert same(cluster, version, GRADE, 1) is None  # and the ranks go on working


def _unused_grads(parallel):
    """On every rank: after one step with find_unused_parameters=True, which grads are None."""
    model, inner, _ = ddp_runs.setup(parallel, UNUSED)
    x, y = UNUSED.local_batch(0, dist.get_rank(), dist.get_world_size())
    UNUSED.loss(model(x), y).backward()
    return [n for n, p in inner.named_parameters() if p.grad is None]


@pytest.mark.parametrize("version", ["bucket", "torch"])
def test_find_unused_parameters_trains_and_leaves_unused_grads_none_as_torch(cluster, version):
    factory = functools.partial(ddp_runs.VERSIONS[version], find_unused_parameters=True)
    assert same(cluster, factory, UNUSED, 2) is None
    assert cluster.run(_unused_grads, factory)[0] == [
        "frozen.weight", "frozen.bias", "spare.weight", "spare.bias"
    ]  # fmt: skip


def _torch_buckets(cfg, cap_mb):
    """On every rank: torch DDP's buckets (elements each) at its second step, after its rebuild."""
    model = nn.parallel.DistributedDataParallel(cfg.make_model(), bucket_cap_mb=cap_mb)
    seen = []

    def hook(_, bucket):
        seen.append(sum(p.numel() for p in bucket.parameters()))
        return (
            dist.all_reduce(bucket.buffer().div_(2), async_op=True)
            .get_future()
            .then(lambda f: f.value()[0])
        )

    model.register_comm_hook(None, hook)
    for step in range(2):
        seen.clear()
        x, y = cfg.local_batch(step, dist.get_rank(), 2)
        cfg.loss(model(x), y).backward()
    return seen


def _our_buckets(cfg, cap_mb):
    model, _, _ = ddp_runs.setup("bucket", cfg, bucket_cap_mb=cap_mb)
    x, y = cfg.local_batch(0, dist.get_rank(), 2)
    with trace.collectives() as calls:
        cfg.loss(model(x), y).backward()
    return [c.numel for c in calls]


@pytest.mark.parametrize("cap_mb", [1e-6, 0.5, None, 100.0])
def test_buckets_are_torchs_once_it_has_rebuilt_them(cluster, cap_mb):
    """A 3.7 MB MLP: with None torch has a 1 MiB first bucket, then 25 MiB ones."""
    cfg = workload.Config()
    assert cluster.run(_our_buckets, cfg, cap_mb)[0] == cluster.run(_torch_buckets, cfg, cap_mb)[0]


def test_buckets_leave_in_bucket_order_not_in_the_order_gradients_arrive(cluster):
    """The grading model's head bias is registered first (last bucket) and ready first."""
    ours = cluster.run(_our_buckets, GRADE, 1e-6)[0]
    assert ours == expected_buckets(1e-6) == [6, 36, 12, 72, 66, 11]
    ready = cluster.run(_ready_order)[0]
    assert ready[0] == 11 and ready != ours


def _ready_order():
    model, _, _ = ddp_runs.setup("overlap", GRADE)
    x, y = GRADE.local_batch(0, dist.get_rank(), 2)
    with trace.collectives() as calls:
        GRADE.loss(model(x), y).backward()
    return [c.numel for c in calls]


@pytest.mark.parametrize("version", ["bucket", "overlap", "torch"])
def test_no_sync_accumulates_like_torch(cluster, version):
    assert same(cluster, version, GRADE, 2, accumulate=2, bucket_cap_mb=0.001) is None


def _sync_is_decided_at_forward():
    model, inner, _ = ddp_runs.setup("bucket", GRADE)
    x, y = GRADE.local_batch(0, dist.get_rank(), 2)
    with trace.collectives() as calls:
        with model.no_sync():
            loss = GRADE.loss(model(x), y)
        loss.backward()  # outside the block, but forward ran inside it: no communication
        quiet = len(calls)
        GRADE.loss(model(x), y).backward()
        after = len(calls)
        model.finish_gradient_synchronization()  # explicit, and idempotent
        model.finish_gradient_synchronization()
    return quiet, after, len(calls)


def test_no_sync_is_decided_when_forward_runs_and_finish_is_idempotent(cluster):
    quiet, after, end = cluster.run(_sync_is_decided_at_forward)[0]
    assert quiet == 0 and after == len(expected_buckets(None)) == 1 and end == after


# ------------------------------------------------------------------ ZeRO-1
def _zero_against_torch(steps=3):
    """On every rank: weights after ``steps`` with ours (a plain model) and with torch's
    DDP + ZeroRedundancyOptimizer, both with AdamW in two groups (weight decay or not)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    cfg, rank = GPT_GRADE, dist.get_rank()
    ours, _, ours_opt = ddp_runs.setup("zero1", cfg)
    theirs = nn.parallel.DistributedDataParallel(cfg.make_model(seed=cfg.seed + rank))
    theirs_opt = ZeroRedundancyOptimizer(
        cfg.param_groups(theirs.module), torch.optim.AdamW, **cfg.optimizer_defaults()
    )
    for step in range(steps):
        x, y = cfg.local_batch(step, rank, dist.get_world_size())
        for model, opt in ((ours, ours_opt), (theirs, theirs_opt)):
            opt.zero_grad()
            cfg.loss(model(x), y).backward()
            opt.step()
    return [
        (a - b).abs().max().item()
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True)
    ]


def test_zero1_matches_torchs_zero_redundancy_optimizer_with_parameter_groups(cluster):
    for rank in cluster.run(_zero_against_torch):
        assert max(rank) < 1e-12


def test_zero1_under_ddp_and_with_accumulation_gives_the_same_numbers(cluster):
    assert same(cluster, ("bucket", "zero1"), GPT_GRADE, 2, bucket_cap_mb=0.05) is None
    assert same(cluster, "zero1", GPT_GRADE, 2, accumulate=2) is None


def _states():
    out = {}
    for name in ("bucket", "zero1"):
        model, inner, opt = ddp_runs.setup(name, GPT_GRADE)
        x, y = GPT_GRADE.local_batch(0, dist.get_rank(), 2)
        opt.zero_grad()
        GPT_GRADE.loss(model(x), y).backward()
        opt.step()
        out[name] = ddp.model_states(inner, opt)
    with pytest.raises(NotImplementedError, match="consolidate_state_dict"):
        opt.state_dict()
    with pytest.raises(NotImplementedError, match="add none later"):
        opt.add_param_group({"params": [torch.zeros(1)]})
    return out


def test_zero1_holds_half_the_optimizer_state_on_two_ranks_and_no_copy_of_the_weights(cluster):
    states = cluster.run(_states)[0]
    psi = GPT_GRADE.param_bytes()
    assert states["bucket"]["optimizer state"] >= 2 * psi
    assert states["zero1"]["optimizer state"] <= 2 * psi / 2 + 64
    assert states["zero1"]["optimizer's weights"] == 0  # the shard is a view of the parameters
    assert sum(states["zero1"].values()) < sum(states["bucket"].values())


# ------------------------------------------------------------------ running and timing
def test_time_steps_reports_the_slowest_rank_and_traces_comm(cluster):
    out = cluster.run(ddp_runs.time_steps, "bucket", GRADE, 2, 1, bucket_cap_mb=1e-6)
    assert out[0]["seconds"] == out[1]["seconds"]  # the max over ranks, the same everywhere
    assert out[0]["calls_per_step"] == 6  # one per bucket, not the timing's own all-reduce
    assert sum(s.name == "all_reduce" for s in out[0]["spans"]) == 2 * 6  # nor in the spans
    lanes = {(s.lane, s.name) for s in out[0]["spans"]}
    assert {("compute", "backward"), ("compute", "wait"), ("comm", "all_reduce")} <= lanes


def test_train_returns_the_global_loss(cluster):
    plain = cluster.run(ddp_runs.train, "bucket", GPT_GRADE, 2)
    zero = cluster.run(ddp_runs.train, "zero1", GPT_GRADE, 2)
    assert plain[0]["losses"] == plain[1]["losses"]
    assert plain[0]["losses"] == pytest.approx(zero[0]["losses"], rel=1e-12)
    assert plain[0]["losses"] == pytest.approx(GPT_GRADE.baseline(2)["losses"], rel=1e-12)


# ------------------------------------------------------------ devices (faked: no NPU/GPU here)
def test_setup_puts_the_model_on_the_rank_device(monkeypatch):
    from labsupport.runtime.experiments import ddp_runs as run

    monkeypatch.setattr(run, "rank_device", lambda: torch.device("meta"))
    monkeypatch.setattr(run.dist, "get_rank", lambda: 0)
    model, _, _ = run.setup(lambda m: m, workload.Config(hidden=8, in_features=4, out_features=2))
    assert {p.device.type for p in model.parameters()} == {"meta"}


def test_torch_ddp_gets_the_device_index_off_the_cpu_and_one_bucket_as_a_big_cap(monkeypatch):
    got = []
    monkeypatch.setattr(nn.parallel.DistributedDataParallel, "__init__",
                        lambda self, module, **kw: got.append(kw))  # fmt: skip
    ddp.TorchDDP(nn.Linear(2, 2, device="meta"))
    ddp.TorchDDP(nn.Linear(2, 2), bucket_cap_mb=ddp.ONE_BUCKET)
    assert got[0]["device_ids"] == [0] and "device_ids" not in got[1]
    assert got[1]["bucket_cap_mb"] == float(1 << 40)


def test_emulated_compute_takes_its_time_and_leaves_the_gradients_unchanged():
    import time

    def timed(cfg):
        model = cfg.make_model()
        x, y = cfg.global_batch(0)
        t0 = time.perf_counter()
        loss = cfg.loss(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        return t1 - t0, time.perf_counter() - t1, [q.grad for q in model.parameters()]

    fwd, bwd, grads = timed(workload.Config(layers=4, batch=8, compute_ms=40))
    _, _, plain = timed(workload.Config(layers=4, batch=8))
    assert fwd >= 0.04 and bwd >= 0.08  # 40 ms forward, twice that backward (and the CPU's)
    assert all(torch.equal(a, b) for a, b in zip(grads, plain, strict=True))


# ------------------------------------------------------------------ torchrun script
def test_example_runs_under_torchrun_on_two_cpu_ranks():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "examples/ddp_overlap.py",
           "--version", "bucket", "--bucket-mb", "0.5", "--steps", "2", "--hidden", "128",
           "--batch", "8", "--check"]  # fmt: skip
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "median step:" in done.stdout and "step 1:" in done.stdout
    assert "same as one process at every step" in done.stdout
