"""labsupport.ddp: every hand-written data-parallel version trains exactly as one process does."""

from __future__ import annotations

import pytest
import torch

import labsupport as lab
from labsupport import ddp

STEPS = 3
CFG = ddp.Config(in_features=32, hidden=64, layers=3, out_features=8, batch=8)


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=2, timeout=60) as c:
        c.run(ddp.use_threads)
        yield c


@pytest.fixture(scope="module")
def expected():
    return ddp.baseline(STEPS, CFG)


def _close(got: list[torch.Tensor], want: list[torch.Tensor]) -> bool:
    return len(got) == len(want) and all(
        torch.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want, strict=True)
    )


@pytest.mark.parametrize("version", list(ddp.VERSIONS))
def test_every_version_matches_the_single_process_baseline(cluster, expected, version):
    results = cluster.run(ddp.train, version, STEPS, CFG, 4096)
    for rank, r in enumerate(results):
        assert _close(r["grads"], expected["grads"]), f"{version}: gradients differ on rank {rank}"
        assert _close(r["weights"], expected["weights"]), f"{version}: weights differ on {rank}"


def test_without_averaging_the_ranks_drift_apart(cluster, expected):
    """The comparison can fail: local gradients alone do not give the baseline's weights."""

    class Nothing(ddp.Version):
        def finish(self) -> None:
            pass

    results = cluster.run(ddp.train, Nothing, STEPS, CFG)
    assert not _close(results[0]["weights"], expected["weights"])
    assert not _close(results[0]["weights"], results[1]["weights"])


def test_all_reducing_the_hook_argument_averages_weights_not_gradients(cluster, expected):
    """FACTS: the hook gets the parameter; all-reducing it is a bug the comparison catches."""

    class WrongHook(ddp.Overlapped):
        def _hook(self, index):
            def hook(param):
                self.handles.append(self._all_reduce(param.data, "oops", async_op=True))

            return hook

    results = cluster.run(ddp.train, WrongHook, STEPS, CFG)
    assert not _close(results[0]["weights"], expected["weights"])


@pytest.mark.parametrize(
    ("bucket_bytes", "buckets"),
    [(1, 6), (2000, 3), (4096, 2), (1 << 30, 1)],
)
def test_bucketed_issues_one_all_reduce_per_bucket(cluster, bucket_bytes, buckets):
    # gradients in the order backward produces them (bytes): 32, 2048, 256, 16384, 256, 8192;
    # with 2000: [32, 2048] [256, 16384] [256, 8192]; with 4096: [32 .. 16384] [256, 8192]
    sizes = [p.numel() * 4 for p in ddp.make_model(CFG).parameters()][::-1]
    assert len(ddp.make_buckets(sizes, bucket_bytes)) == buckets
    results = cluster.run(ddp.train, "bucket", STEPS, CFG, bucket_bytes)
    assert [r["calls"] for r in results] == [buckets * STEPS] * 2


def test_naive_calls_once_per_parameter_and_flat_once(cluster):
    n_params = len(list(ddp.make_model(CFG).parameters()))
    assert cluster.run(ddp.train, "naive", 1, CFG)[0]["calls"] == n_params
    assert cluster.run(ddp.train, "flat", 1, CFG)[0]["calls"] == 1


def test_make_buckets_groups_in_order_and_rejects_bad_sizes():
    assert ddp.make_buckets([10, 10, 10, 10], 20) == [[0, 1], [2, 3]]
    assert ddp.make_buckets([50, 1, 1], 20) == [[0], [1, 2]]
    assert ddp.make_buckets([1, 1], 100) == [[0, 1]]
    with pytest.raises(ValueError, match="positive"):
        ddp.make_buckets([1], 0)
    with pytest.raises(ValueError, match="choose one of"):
        ddp.make_version("fast")


def test_uneven_batch_is_a_clear_error():
    with pytest.raises(ValueError, match="multiple of 3"):
        ddp.local_batch(0, 0, 3, CFG)


def test_time_steps_reports_the_slowest_rank_and_traces_comm(cluster):
    out = cluster.run(ddp.time_steps, "bucket", 2, 1, CFG, 4096)
    assert out[0]["seconds"] == out[1]["seconds"]  # the max over ranks, the same everywhere
    lanes = {(s.lane, s.name) for s in out[0]["spans"]}
    assert {("compute", "backward"), ("comm", "all_reduce")} <= lanes


# ------------------------------------------------------------------ torchrun script
def test_example_runs_under_torchrun_on_two_cpu_ranks():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "examples/ddp_overlap.py",
           "--version", "bucket", "--bucket-mb", "0.5", "--steps", "2", "--hidden", "128",
           "--batch", "8", "--check"]  # fmt: skip
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "median step:" in done.stdout and "step 1:" in done.stdout
    assert "weights match the single-process run" in done.stdout


# ------------------------------------------------------------------ graders (checks/overlap)
def test_graders_pass_the_library_versions_and_report_stubs_and_mistakes(cluster, capsys):
    from labsupport.check.overlap import check_bucketed, check_overlapped

    class Stub(ddp.Overlapped):
        def _hook(self, index):
            def hook(param):
                raise NotImplementedError("Exercise 07.1")

            return hook

    class AfterBackward(ddp.Naive):  # right gradients, but nothing overlaps
        pass

    class OneBucket(ddp.Bucketed):  # right gradients, wrong number of calls
        def __init__(self, bucket_bytes):
            super().__init__(1 << 30)

    assert check_overlapped(ddp.Overlapped, cluster)
    assert check_bucketed(ddp.Bucketed, cluster)
    stub = check_overlapped(Stub, cluster)
    assert not stub and not stub.implemented and "not implemented" in stub.message
    late = check_overlapped(AfterBackward, cluster)
    assert not late and "during backward" in late.message
    wrong = check_bucketed(OneBucket, cluster)
    assert not wrong and "all-reduce calls per step" in wrong.message


# ------------------------------------------------------------ devices (faked: no NPU/GPU here)
def test_setup_puts_the_model_on_the_rank_device(monkeypatch):
    from labsupport.ddp import run

    monkeypatch.setattr(run, "rank_device", lambda: torch.device("meta"))
    model, _, _ = run.setup("flat", CFG, 4096)
    assert {p.device.type for p in model.parameters()} == {"meta"}
    model, _, _ = run.setup("flat", CFG, 4096, torch.device("cpu"))  # an explicit device wins
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_device_clock_synchronizes_the_gpu_or_npu_first_and_nothing_on_the_cpu(monkeypatch):
    import sys
    import time
    import types

    from labsupport.ddp import run

    calls = []
    fake_cuda = types.SimpleNamespace(synchronize=lambda d: calls.append(("cuda", str(d))))
    fake_npu = types.SimpleNamespace(synchronize=lambda d: calls.append(("npu", str(d))))
    monkeypatch.setattr(torch, "cuda", fake_cuda)
    monkeypatch.setattr(torch, "npu", fake_npu, raising=False)
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: calls.append("clock") or real())
    run.device_clock(torch.device("cuda", 1))
    run.device_clock("npu:0")
    run.device_clock(torch.device("cpu"))
    assert calls == [("cuda", "cuda:1"), "clock", ("npu", "npu:0"), "clock", "clock"]


def test_every_rank_starts_together_synchronize_barrier_synchronize(monkeypatch):
    from labsupport.ddp import run

    calls = []
    monkeypatch.setattr(run, "synchronize", lambda d: calls.append(f"sync {d}"))
    monkeypatch.setattr(run.dist, "barrier", lambda: calls.append("barrier"))
    run._lined_up(torch.device("cuda", 0))
    assert calls == ["sync cuda:0", "barrier", "sync cuda:0"]


def test_torch_ddp_gets_the_device_index_on_a_gpu_and_none_on_the_cpu(monkeypatch):
    import types

    from torch import nn

    got = []
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel",
                        lambda model, **kw: got.append(kw["device_ids"]) or model)  # fmt: skip

    def model_on(device: torch.device) -> types.SimpleNamespace:
        param = types.SimpleNamespace(device=device, requires_grad=True)
        return types.SimpleNamespace(parameters=lambda: iter([param]))

    ddp.TorchDDP(1 << 20).wrap(model_on(torch.device("cuda", 3)))
    ddp.TorchDDP(1 << 20).wrap(model_on(torch.device("cpu")))
    assert got == [[3], None]


def _timed_step(cfg: ddp.Config) -> tuple[float, float, list[torch.Tensor]]:
    import time

    model = ddp.make_model(cfg)
    x, y = ddp.global_batch(0, cfg)
    t0 = time.perf_counter()
    loss = ddp.loss_fn(model(x), y)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, [q.grad for q in model.parameters()]


def test_emulated_compute_sleeps_and_leaves_the_gradients_unchanged():
    fwd, bwd, grads = _timed_step(ddp.Config(layers=4, batch=8, compute_ms=40))
    _, _, plain = _timed_step(ddp.Config(layers=4, batch=8))
    assert 0.04 <= fwd < 0.2  # 40 ms forward
    assert 0.08 <= bwd < 0.4  # twice that backward
    assert all(torch.equal(a, b) for a, b in zip(grads, plain, strict=True))
