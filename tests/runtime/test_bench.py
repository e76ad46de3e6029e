"""runtime.bench: factors, exact checking, the table, the three ways to run it, the fit."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from labsupport.runtime import device as bench_device
from labsupport.runtime.bench import BenchOptions, busbw_factor, fit_alpha_beta, parse_size
from labsupport.runtime.bench.__main__ import main
from labsupport.runtime.bench.collectives import COLLECTIVES
from labsupport.runtime.bench.core import Result
from labsupport.runtime.bench.progress import Progress
from labsupport.runtime.bench.report import footer_lines, header_lines, row_line
from labsupport.runtime.bench.values import input_values, reduced_values

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
TORCHRUN = str(Path(PY).with_name("torchrun"))

# ------------------------------------------------------------------ busbw factors


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_busbw_factors_are_the_ones_in_facts(n):
    # FACTS.md, "Bandwidth conventions (nccl-tests, doc/PERFORMANCE.md)"
    facts = {
        "all_reduce": 2 * (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_gather": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
        "reduce": 1.0,
        "sendrecv": 1.0,
    }
    assert set(facts) == set(COLLECTIVES)
    for name, factor in facts.items():
        assert busbw_factor(name, n) == pytest.approx(factor), name


def test_sixteen_rank_all_reduce_factor_from_errata():
    # FACTS.md errata 4: for 16 ranks, busbw = algbw x 2*15/16
    assert busbw_factor("all_reduce", 16) == pytest.approx(1.875)


# ------------------------------------------------------------- exact inputs


@pytest.mark.parametrize(
    "op, dtype",
    [
        (op, dtype)
        for op in ("sum", "prod", "min", "max", "avg")
        for dtype in (torch.bfloat16, torch.float16, torch.int8, torch.float32)
        if op != "avg" or dtype.is_floating_point  # avg is for floating types
    ],
)
def test_reduction_of_the_inputs_is_exact_in_every_dtype(op, dtype):
    index = torch.arange(97)
    for n in (1, 2, 3, 5, 8):
        values = [input_values(r, n, index, op).to(dtype) for r in range(n)]
        acc = values[0].clone()
        for v in values[1:]:  # reduce in the dtype itself, as a backend would
            if op in ("sum", "avg"):
                acc = acc + v
            elif op == "prod":
                acc = acc * v
            elif op == "min":
                acc = torch.minimum(acc, v)
            else:
                acc = torch.maximum(acc, v)
        if op == "avg":
            acc = acc / n
        expected = reduced_values(n, index, op).to(dtype)
        assert torch.equal(acc, expected), (op, dtype, n)
        assert len(set(expected.tolist())) > 1, "a constant result would hide misplaced pieces"


# ------------------------------------------------------------------- options


def test_the_benchmark_reads_the_core_reduce_op_table():
    import torch.distributed as dist

    from labsupport import reduce_ops

    assert list(reduce_ops.BY_NAME) == ["sum", "prod", "min", "max", "avg"]
    assert [BenchOptions(op=name).op for name in reduce_ops.BY_NAME] == list(reduce_ops.BY_NAME)
    mine, got = torch.tensor([2, 6]), torch.tensor([3, 4])
    assert reduce_ops.combine(dist.ReduceOp.MAX)(mine, got).tolist() == [3, 6]
    assert reduce_ops.combine(dist.ReduceOp.AVG) is reduce_ops.COMBINE[dist.ReduceOp.SUM]
    assert dist.ReduceOp.AVG not in reduce_ops.COMBINE  # a bare schedule run cannot finish it


def test_sizes_follow_nccl_tests_suffixes_and_steps():
    assert parse_size("1K") == 1024 and parse_size("1.5M") == 1536 * 1024
    assert parse_size("2G") == 2 * 1024**3 and parse_size("64") == 64
    opts = BenchOptions(minbytes="1K", maxbytes="64K", stepfactor=4)
    assert opts.sizes() == [1024, 4096, 16384, 65536]
    opts = BenchOptions(minbytes="1K", maxbytes="4K", stepbytes="1K")
    assert opts.sizes() == [1024, 2048, 3072, 4096]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-b", "64K", "-e", "1K"], "minbytes (65536) is larger than maxbytes (1024)"),
        (["--collective", "allscatter"], "unknown collective 'allscatter'"),
        (["-d", "float8"], "unknown or unsupported datatype 'float8'"),
        (["-f", "1"], "stepfactor must be greater than 1"),
        (["-f", "0.5"], "stepfactor must be greater than 1"),
        (["-b", "12Q"], "invalid minbytes '12Q'"),
        (["-o", "xor"], "unknown op 'xor'"),
        (["-a", "7"], "average must be 0 (rank 0), 1 (avg), 2 (min) or 3 (max)"),
        (["--collective", "sendrecv", "--nproc", "1"], "sendrecv needs at least 2 ranks"),
        (["--collective", "broadcast", "-r", "4", "--nproc", "2"], "root 4 is not a rank"),
    ],
)
def test_bad_options_give_a_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_collective_names_are_forgiving():
    assert BenchOptions(collective="AllReduce").collective == "all_reduce"
    assert BenchOptions(collective="alltoall").collective == "all_to_all"
    assert BenchOptions(collective="send/recv").collective == "sendrecv"
    assert BenchOptions(datatype="bf16").datatype == "bfloat16"


# --------------------------------------------------------------------- table


def _result(in_place, time_us=12.5, wrong=0, **kw):
    fields = dict(collective="all_reduce", size=4096, count=1024, type="float", redop="sum",
                  root=-1, nranks=4, in_place=in_place, time_us=time_us,
                  algbw=None if time_us is None else 4096 / 1e9 / (time_us / 1e6),
                  busbw=None if time_us is None else 4096 / 1e9 / (time_us / 1e6) * 1.5,
                  wrong=wrong)  # fmt: skip
    fields.update(kw)
    return Result(**fields)


def test_table_has_nccl_tests_columns():
    from labsupport.runtime.bench.core import Sweep

    sweep = Sweep(BenchOptions(), 4, "gloo", ["Rank  0 Pid 1 on host device cpu"])
    header = header_lines(sweep)
    names = header[-2].lstrip("#").split()
    assert names == ["size", "count", "type", "redop", "root"] + [
        "time", "algbw", "busbw", "#wrong"] * 2  # fmt: skip
    assert header[-1].split()[1:7] == ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)"]
    line = row_line(_result(False), _result(True, time_us=12345.6, wrong=3))
    assert line.split() == [
        "4096", "1024", "float", "sum", "-1",
        "12.50", "0.33", "0.49", "0",
        "12346", "0.00", "0.00", "3",
    ]  # fmt: skip
    # each column ends where its header ends, as in nccl-tests
    assert len(line) == len(header[-2])


def test_the_header_says_what_out_of_place_means_for_in_place_only_collectives():
    from labsupport.runtime.bench.core import Sweep

    def note(collective):
        sweep = Sweep(BenchOptions(collective=collective), 4, "gloo", ["Rank  0"])
        return [line for line in header_lines(sweep) if "out-of-place =" in line]

    assert note("all_reduce") == [
        "# out-of-place = a copy of the input + the in-place call "
        "(torch's all_reduce is in place only)"
    ]
    assert note("broadcast") and note("reduce") and not note("all_gather")


def test_missing_in_place_and_unchecked_results_print_na():
    line = row_line(_result(False, wrong=None), _result(True, time_us=None, wrong=None))
    assert line.split()[-5:] == ["N/A"] * 5


def test_footer_counts_failed_results_and_averages_busbw():
    results = [_result(False, time_us=10.0), _result(True, time_us=20.0, wrong=2)]
    footer = footer_lines(results)
    assert footer[0] == "# Out of bounds values : 1 FAILED"
    expected = (results[0].busbw + results[1].busbw) / 2
    assert float(footer[1].split(":")[1]) == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------- alpha-beta fit


def _synthetic(alpha, beta, f, sizes, ranks, noise=0.0, seed=0):
    rng = torch.Generator().manual_seed(seed)
    rows = []
    for p in ranks:
        for s in sizes:
            t = f(s, p, alpha, beta) * (1 + noise * float(torch.randn(1, generator=rng)))
            rows.append(dict(collective="all_reduce", size=s, nranks=p, in_place=True,
                             time_us=t * 1e6))  # fmt: skip
    return rows


@pytest.mark.parametrize("noise", [0.0, 0.002])
def test_fit_recovers_alpha_and_beta_within_one_percent(noise):
    from labsupport import costmodel

    alpha, beta = 25e-6, 1 / 2.5e9  # 25 us, 2.5 GB/s
    sizes = [2**k for k in range(8, 27, 2)]
    rows = _synthetic(alpha, beta, costmodel.ring_all_reduce_time, sizes, (2, 4), noise)
    fit = fit_alpha_beta(rows)
    assert fit.algorithm == "ring"
    assert fit.alpha == pytest.approx(alpha, rel=0.01)
    assert fit.beta == pytest.approx(beta, rel=0.01)
    assert fit.bandwidth == pytest.approx(2.5, rel=0.01)
    assert fit.residual < 0.01
    # the crossover: latency term 2(p-1)α equals the bandwidth term 2S(p-1)/p·β
    assert fit.crossover(4) == pytest.approx(alpha * 4 / beta, rel=0.02)


def test_fit_simple_model_and_refuses_one_size():
    rows = [dict(collective="sendrecv", size=s, nranks=2, in_place=False,
                 time_us=(10e-6 + s / 1e9) * 1e6) for s in (1e3, 1e5, 1e7)]  # fmt: skip
    fit = fit_alpha_beta(rows)
    assert fit.algorithm == "simple"
    assert fit.alpha == pytest.approx(10e-6) and fit.bandwidth == pytest.approx(1.0)
    with pytest.raises(ValueError, match="two sizes"):
        fit_alpha_beta(rows[:1])
    with pytest.raises(ValueError, match="no α-β model for sendrecv"):
        fit_alpha_beta(rows, algorithm="ring")


# ----------------------------------------------------------- device selection


class _FakeDeviceModule:
    def __init__(self):
        self.calls = []

    def synchronize(self, device=None):
        self.calls.append(("synchronize", str(device)))

    def set_device(self, device):
        self.calls.append(("set_device", str(device)))

    class Event:
        clock = 0.0

        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            type(self).clock += 0.004  # 4 ms per mark
            self.t = type(self).clock

        def elapsed_time(self, end):
            return end.t - self.t  # the real API answers in ms


def test_synchronize_picks_npu_cuda_or_nothing(monkeypatch):
    fake_npu, fake_cuda = _FakeDeviceModule(), _FakeDeviceModule()
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(torch, "npu", fake_npu, raising=False)
    monkeypatch.setattr(torch, "cuda", fake_cuda)
    bench_device.synchronize("npu:3")
    bench_device.synchronize(torch.device("cuda", 1))
    bench_device.synchronize("cpu")
    assert fake_npu.calls == [("synchronize", "npu:3")]
    assert fake_cuda.calls == [("synchronize", "cuda:1")]
    bench_device.set_device("npu:2")
    assert fake_npu.calls[-1] == ("set_device", "npu:2")


def test_npu_needs_torch_npu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # makes the import fail
    with pytest.raises(ImportError):
        bench_device.synchronize("npu:0")


def test_iteration_clock_uses_device_events_and_milliseconds(monkeypatch):
    fake = _FakeDeviceModule()
    monkeypatch.setattr(torch, "cuda", fake)
    clock = bench_device.IterationClock("cuda:0", iterations=3)
    for _ in range(4):
        clock.mark()
    assert clock.intervals() == pytest.approx([4e-6] * 3)  # 0.004 ms each, in seconds


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    plain = io.StringIO()
    Progress(3, "all_reduce", stream=plain).advance("1K")
    assert plain.getvalue() == ""

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    Progress(3, "all_reduce", stream=tty).advance("1K")
    assert "[##########....................] 1/3 1K" in tty.getvalue()
    monkeypatch.setenv("CI", "true")
    ci = Terminal()
    Progress(3, "all_reduce", stream=ci).advance("1K")
    assert ci.getvalue() == ""


# -------------------------------------------------------- on ranks (a cluster)


@pytest.fixture(scope="module")
def cluster():
    from labsupport.runtime.launch import Cluster

    with Cluster(world_size=2, backend="gloo", timeout=120) as c:
        yield c


SMALL = dict(minbytes="1K", maxbytes="16K", stepfactor=4, iters=3, warmup_iters=1)


def test_every_collective_checks_out_on_two_ranks(cluster):
    from labsupport.runtime.bench import benchmark

    for name in COLLECTIVES:
        records = benchmark(cluster, name, show=False, as_frame=False, **SMALL)
        assert [r["size"] for r in records[::2]] == ([1024, 4096, 16384]), name
        checked = [r for r in records if r["time_us"] is not None]
        assert all(r["wrong"] == 0 for r in checked), name
        assert len(checked) == (6 if COLLECTIVES[name].in_place else 3), name
        for r in checked:
            assert r["busbw"] == pytest.approx(r["algbw"] * busbw_factor(name, 2))
            assert r["algbw"] == pytest.approx(r["size"] / 1e9 / (r["time_us"] / 1e6))
            assert len(r["iter_us"]) == 3


def test_wrong_counts_a_corrupted_result(cluster):
    from labsupport.runtime.bench import benchmark

    records = benchmark(cluster, "all_gather", show=False, as_frame=False, inject_fault=5, **SMALL)
    assert {r["wrong"] for r in records if r["time_us"] is not None} == {5}


def test_notebook_table_is_printed_by_the_kernel(cluster, capsys):
    from labsupport.runtime.bench import benchmark

    benchmark(cluster, "reduce", root=1, op="max", datatype="int32", **SMALL)
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [row[:5] for row in rows] == [
        [str(s), str(s // 4), "int32", "max", "1"] for s in (1024, 4096, 16384)
    ]
    assert "# Avg bus bandwidth" in out


# ------------------------------------------------- command line: torchrun and --nproc


def _table(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if re.match(r"^\s+\d", line)]


def _run(cmd, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("CI", None)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def test_cli_torchrun_and_nproc_print_the_same_table(tmp_path):
    args = ["-b", "1K", "-e", "64K", "-f", "4"]
    cmd = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "labsupport.runtime.bench", *args,
           "--json", "tr.json"]  # fmt: skip
    torchrun = _run(cmd, tmp_path)
    assert torchrun.returncode == 0, torchrun.stderr[-2000:]
    nproc = _run(
        [PY, "-m", "labsupport.runtime.bench", "--nproc", "2", *args, "--csv", "np.csv"], tmp_path
    )
    assert nproc.returncode == 0, nproc.stderr[-2000:]
    for run in (torchrun, nproc):
        assert "# Avg bus bandwidth" in run.stdout
        assert re.search(r"nranks 2 backend (gloo|nccl|hccl) ", run.stdout)
    a, b = _table(torchrun.stdout), _table(nproc.stdout)
    assert (
        [row[:5] for row in a]
        == [row[:5] for row in b]
        == [[str(s), str(s // 4), "float", "sum", "-1"] for s in (1024, 4096, 16384, 65536)]
    )
    assert all(len(row) == 13 and row[8] == row[12] == "0" for row in a + b)
    saved = json.loads((tmp_path / "tr.json").read_text())
    assert len(saved["results"]) == 8 and saved["nranks"] == 2
    assert (tmp_path / "np.csv").read_text().startswith("collective,size,count,type")


def test_cli_exits_non_zero_when_a_result_is_wrong(tmp_path):
    cmd = [PY, "-m", "labsupport.runtime.bench", "--nproc", "2", "-b", "1K", "-e", "1K", "-n", "2",
           "--inject-fault", "1"]  # fmt: skip
    run = _run(cmd, tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "# Out of bounds values : 2 FAILED" in run.stdout


def test_cli_outside_torchrun_says_how_to_start(monkeypatch, capsys):
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["-b", "1K", "-e", "1K"])
    assert exit_info.value.code == 2
    assert (
        "torchrun --standalone --nproc_per_node=N -m labsupport.runtime.bench"
        in capsys.readouterr().err
    )
