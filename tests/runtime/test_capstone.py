"""The graders of notebooks 07 and 10 pass the library's classes and reject the gamed answers.

Every class below gets the numbers right, or nearly, in a way a weaker grader passed:
a wait inside the hook (through the Work, its future, ``wait_all`` or ``async_op=False``),
everything sent from backward's last gradient, buckets sent in the order gradients
arrive, a cap read as bytes or as a strict maximum, a ZeRO-1 that all-reduces, ignores
parameter groups or decays a frozen layer. Each must fail, with a message that says why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import ddp
from labsupport.runtime import capstone
from labsupport.runtime.check import capstone as grader
from labsupport.runtime.check.overlap import check_bucketed, check_overlapped
from labsupport.runtime.experiments import ddp_runs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    """Two ranks on an emulated network (the overlap graders set theirs, then put it back)."""
    with lab.Cluster(world_size=2, timeout=120, network="two-nodes") as c:
        c.run(ddp_runs.use_threads)
        yield c


# ------------------------------------------------------------------ gamed DDP answers
class WaitInHook(ddp.Overlapped):
    """Issues asynchronously and waits at once, inside the hook: right numbers, no overlap."""

    def grad_ready(self, param):
        param.grad.div_(self.world_size)
        dist.all_reduce(param.grad, async_op=True).wait()


class BlockingInHook(ddp.Overlapped):
    def grad_ready(self, param):
        param.grad.div_(self.world_size)
        dist.all_reduce(param.grad)


class FutureWait(ddp.Overlapped):
    """Waits through the Work's future, inside the hook: the old trace did not see it."""

    def grad_ready(self, param):
        param.grad.div_(self.world_size)
        dist.all_reduce(param.grad, async_op=True).get_future().wait()


class WaitAll(ddp.Overlapped):
    def grad_ready(self, param):
        param.grad.div_(self.world_size)
        torch.futures.wait_all([dist.all_reduce(param.grad, async_op=True).get_future()])


class AtEnd:
    """Counts the gradients and hands them all on from the hook of backward's last one."""

    def prepare_for_backward(self):
        super().prepare_for_backward()
        self.pending = []

    def grad_ready(self, param):
        self.pending.append(param)
        if len(self.pending) == len(self.params):
            for p in self.pending:
                super().grad_ready(p)


class AllAtEnd(AtEnd, ddp.Overlapped):
    """Every all-reduce issued from the hook of backward's last gradient."""


class BucketsAtEnd(AtEnd, ddp.Bucketed):
    """Every bucket, in bucket order, issued from the hook of backward's last gradient."""


class FromImport(ddp.Overlapped):
    """Right, spelled ``from torch.distributed import all_reduce`` (the old trace missed it)."""

    def grad_ready(self, param):
        from torch.distributed import all_reduce

        param.grad.div_(self.world_size)
        self.handles.append(all_reduce(param.grad, async_op=True))


class ReadyOrder(ddp.Bucketed):
    """Sends each bucket as soon as it is complete, whatever the buckets before it."""

    def grad_ready(self, param):
        k = self.bucket_of[id(param)]
        self.missing[k] -= 1
        if self.missing[k] == 0:
            bucket = self.buckets[k]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).div_(self.world_size)
            self.in_flight.append((dist.all_reduce(flat, async_op=True), flat, bucket))


class CapInBytes(ddp.Bucketed):
    def __init__(self, module, bucket_cap_mb=None, **kwargs):
        super().__init__(module, bucket_cap_mb=bucket_cap_mb and bucket_cap_mb / 2**20, **kwargs)


class CapAsMaximum(ddp.Bucketed):
    """Closes a bucket *before* the tensor that would cross the cap (not torch's rule)."""

    def __init__(self, module, bucket_cap_mb=None, **kwargs):
        super().__init__(module, bucket_cap_mb=bucket_cap_mb, **kwargs)
        cap = ddp.bucket_caps(bucket_cap_mb)[1]
        buckets, filled = [[]], 0
        for p in self.params[::-1]:
            size = p.numel() * p.element_size()
            if buckets[-1] and filled + size > cap:
                buckets.append([])
                filled = 0
            buckets[-1].append(p)
            filled += size
        self.buckets = buckets
        self.bucket_of = {id(p): k for k, b in enumerate(buckets) for p in b}


class Summed(ddp.Bucketed):
    def grad_ready(self, param):
        self.world_size, real = 1, self.world_size  # forgets to divide
        super().grad_ready(param)
        self.world_size = real


class MissedBucket(ddp.Bucketed):
    """Never sends the last bucket."""

    def grad_ready(self, param):
        super().grad_ready(param)
        if self.next_bucket == len(self.buckets):
            work, flat, bucket = self.in_flight.pop()
            work.wait()


class NoBroadcast(ddp.Bucketed):
    def broadcast_module_states(self):
        pass


class OneBehind(ddp.Bucketed):
    """Waits for the previous bucket once the next is issued: still two in flight at once."""

    def grad_ready(self, param):
        super().grad_ready(param)
        for work, _, _ in self.in_flight[:-1]:
            work.wait()


class Stub(ddp.DDPBase):
    def grad_ready(self, param):
        raise NotImplementedError("Exercise 07.1")


@pytest.mark.parametrize(
    ("cls", "words"),
    [(WaitInHook, "it waited"), (BlockingInHook, "it waited"), (FutureWait, "it waited"),
     (WaitAll, "it waited"), (ddp.Naive, "backward's last gradient"),
     (AllAtEnd, "backward's last gradient"), (Summed, "summed, not averaged"),
     (NoBroadcast, "before the first step")],
)  # fmt: skip
def test_overlapped_grader_rejects(cluster, cls, words):
    result = check_overlapped(cls, cluster)
    assert not result and words in result.message, result.message


@pytest.mark.parametrize(
    ("cls", "words"),
    [(ReadyOrder, "not in bucket order"), (CapInBytes, "one per bucket"),
     (CapAsMaximum, "one per bucket"), (MissedBucket, "most often missed"),
     (ddp.Overlapped, "TypeError"), (BucketsAtEnd, "backward's last gradient"),
     (OneBehind, "it waited")],
)  # fmt: skip
def test_bucketed_grader_rejects(cluster, cls, words):
    result = check_bucketed(cls, cluster)
    assert not result and words in result.message, result.message


def test_ddp_graders_pass_the_library_and_call_a_stub_not_implemented(cluster):
    assert check_overlapped(ddp.Overlapped, cluster)
    assert check_bucketed(ddp.Bucketed, cluster)
    assert grader.check_ddp(ddp.Bucketed, cluster)
    assert grader.passed(ddp.Bucketed) and not grader.passed(ReadyOrder)
    stub = check_overlapped(Stub, cluster)
    assert not stub and not stub.implemented and "not implemented" in stub.message


def test_the_overlap_is_judged_on_the_graders_network_which_is_then_put_back(cluster):
    from labsupport.runtime import emulator

    before = cluster.run(emulator.current_network)
    assert check_overlapped(FromImport, cluster)  # seen, however all_reduce is spelled
    assert cluster.run(emulator.current_network) == before


def test_on_plain_gloo_the_grader_starts_an_emulated_cluster_for_the_timing():
    with lab.Cluster(world_size=2, timeout=120, backend="gloo") as plain:
        plain.run(ddp_runs.use_threads)
        assert check_bucketed(ddp.Bucketed, plain)
        assert not check_overlapped(WaitInHook, plain)


def test_capstone_ddp_grader_rejects_what_07s_does(cluster):
    result = grader.check_ddp(ReadyOrder, cluster)
    assert not result and "bucket order" in result.message
    result = grader.check_ddp(BucketsAtEnd, cluster)
    assert not result and "backward's last gradient" in result.message


# ------------------------------------------------------------------ gamed ZeRO-1 answers
class ZeroAllReduce(ddp.ZeRO1):
    """Right numbers: all-reduces the whole gradient, then keeps its shard."""

    def sharded_step(self):
        real = dist.reduce_scatter_tensor

        def via_all_reduce(out, inp, group=None):
            dist.all_reduce(inp, group=group)
            out.copy_(inp.chunk(self.world_size)[self.rank])

        dist.reduce_scatter_tensor = via_all_reduce
        try:
            super().sharded_step()
        finally:
            dist.reduce_scatter_tensor = real


class ZeroSummed(ddp.ZeRO1):
    def sharded_step(self):
        self.world_size, real = 1, self.world_size
        try:
            super().sharded_step()
        finally:
            self.world_size = real


class ZeroNoBroadcast(ddp.ZeRO1):
    def shard(self):
        real = dist.broadcast
        dist.broadcast = lambda *args, **kwargs: None
        try:
            return super().shard()
        finally:
            dist.broadcast = real


class ZeroOneGroup(ddp.ZeRO1):
    """Puts every piece in one group with the class's defaults: weight decay everywhere."""

    def shard(self):
        local = super().shard()
        pieces = [p for g in local.param_groups for p in g["params"]]
        groups = [{"params": pieces}] + [{"params": []} for _ in self.param_groups[1:]]
        return self.optimizer_class(groups, **self.defaults)


class ZeroDecaysFrozen(ddp.ZeRO1):
    """Steps the frozen layer's elements too, with a zero gradient: AdamW decays them."""

    def shard(self):
        frozen = [p for g in self.param_groups for p in g["params"] if not p.requires_grad]
        for p in frozen:
            p.requires_grad_(True)
        try:
            return super().shard()
        finally:
            for p in frozen:
                p.requires_grad_(False)

    def sharded_step(self):
        for p, _, _, _ in self.pieces:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        super().sharded_step()


class ZeroUnsharded(ddp.ZeRO1):
    """Every rank steps every element after an all-reduce: right numbers, nothing saved."""

    def shard(self):
        world, rank = self.world_size, self.rank
        self.world_size, self.rank = 1, 0
        try:
            return super().shard()
        finally:
            self.world_size, self.rank = world, rank

    def sharded_step(self):
        flat_grad = torch.zeros_like(self.flat)
        for p, *_ in self.pieces:
            if p.grad is not None:
                o = self.offsets[id(p)]
                flat_grad[o : o + p.numel()].copy_(p.grad.reshape(-1))
        dist.all_reduce(flat_grad.div_(self.world_size))
        for _, piece, a, b in self.pieces:
            piece.grad = flat_grad[a:b]
        self.optim.step()


class ZeroCopies(ddp.ZeRO1):
    """Its shard is a copy of the parameters, not a view: the grader cannot map it."""

    def shard(self):
        local = super().shard()
        for g in local.param_groups:
            g["params"] = [p.clone() for p in g["params"]]
        return local


@pytest.mark.parametrize(
    ("cls", "words"),
    [(ZeroAllReduce, "reduce_scatter_tensor"), (ZeroSummed, "summed, not averaged"),
     (ZeroNoBroadcast, "before the first step"), (ZeroOneGroup, "differ"),
     (ZeroDecaysFrozen, "grading model"), (ZeroUnsharded, "two ranks' shards"),
     (ZeroCopies, "not a slice of self.flat")],
)  # fmt: skip
def test_zero1_grader_rejects(cluster, cls, words):
    result = grader.check_zero1(cls, cluster)
    assert not result and words in result.message, result.message


def test_zero1_grader_passes_the_library(cluster, capsys):
    assert grader.check_zero1(ddp.ZeRO1, cluster)
    assert "1/2 of the elements" in capsys.readouterr().out


def test_first_divergence_names_the_step_and_the_summed_gradients(cluster):
    results = cluster.run(capstone.compare_steps, Summed, grader.GPT_GRADE, 2, bucket_cap_mb=0.05)
    found = capstone.first_divergence(results)
    assert found["step"] == 0 and found["what"] == "gradients"
    assert found["ratio"] == pytest.approx(2.0, rel=1e-6)  # 2 ranks: twice the mean


# ------------------------------------------------------------------ torchrun
def test_example_runs_under_torchrun_on_two_cpu_ranks():
    torchrun = Path(sys.executable).with_name("torchrun")
    for strategy in ("bucket", "zero1"):
        cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "examples/capstone.py",
               "--strategy", strategy, "--steps", "3", "--d-model", "32", "--check"]  # fmt: skip
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "step 2: loss" in done.stdout and "median step:" in done.stdout
        assert "same as one process at every step" in done.stdout


# ------------------------------------------------------------------ a folder of notebooks
def _edit_cell(nb, exercise: str, old: str, new: str) -> None:
    cell = next(c for c in nb.cells if c.source.startswith(f"# Exercise {exercise}:"))
    assert old in cell.source
    cell.source = cell.source.replace(old, new)


def test_load_answers_reports_a_broken_cell_and_a_missing_one(tmp_path):
    import nbformat
    from labkit.notebooks import load_answers

    nb = nbformat.read(ROOT / "notebooks/solutions/10_capstone.ipynb", as_version=4)
    _edit_cell(nb, "10.2", "def sharded_step(self):", "def sharded_step(self)")
    nbformat.write(nb, tmp_path / "x.ipynb")
    namespace, problems = load_answers(tmp_path / "x.ipynb", ["10.1", "10.2", "10.3"])
    assert isinstance(namespace["MyDDP"], type) and "10.1" not in problems
    assert "SyntaxError" in problems["10.2"]
    assert "no cell starts with `# Exercise 10.3:`" in problems["10.3"]


def test_the_folder_command_prints_one_line_per_learner(tmp_path):
    import nbformat

    solution = nbformat.read(ROOT / "notebooks/solutions/10_capstone.ipynb", as_version=4)
    nbformat.write(solution, tmp_path / "alice.ipynb")
    (tmp_path / "bob.ipynb").write_text((ROOT / "notebooks/10_capstone.ipynb").read_text())
    summed = nbformat.read(ROOT / "notebooks/solutions/10_capstone.ipynb", as_version=4)
    _edit_cell(summed, "10.1", ".div_(self.world_size)", "")
    nbformat.write(summed, tmp_path / "carol.ipynb")
    cmd = [sys.executable, "-m", "labkit.capstone", "grade", str(tmp_path),
           "--ranks", "2", "--timeout", "60", "--gradebook", str(tmp_path / "g.csv")]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["alice", "bob", "carol"]
    assert lines[0] == "alice: 10.1 PASS  10.2 PASS"
    assert lines[1].startswith("bob: 10.1 TODO  10.2 TODO") and "not implemented yet" in lines[1]
    assert lines[2].startswith("carol: 10.1 FAIL  10.2 PASS") and "step 0" in lines[2]


def test_the_folder_command_refuses_a_folder_without_notebooks(tmp_path):
    cmd = [sys.executable, "-m", "labkit.capstone", "grade", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no .ipynb files" in done.stderr


# ------------------------------------------------------------------ traffic on netem
def test_netem_counts_ring_traffic_for_ddp_and_zero1():
    from labsupport import netem

    fast = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
    cfg = capstone.GPTConfig(d_model=32, layers=2, batch=8)
    with lab.Cluster(world_size=2, timeout=120, network=fast) as c:
        c.run(ddp_runs.use_threads)
        sent = {s: c.run(ddp_runs.traffic_per_step, s, cfg, 2, bucket_cap_mb=0.05)[0]
                for s in ("bucket", "zero1")}  # fmt: skip
        timed = c.run(ddp_runs.time_steps, "zero1", cfg, 2, 1)
    psi = cfg.param_bytes()
    assert sent["bucket"] == pytest.approx(psi, rel=0.01)  # 2(p-1)/p·Ψ with p = 2
    assert sent["zero1"] == pytest.approx(sent["bucket"], rel=0.01)
    names = {s.name for s in timed[0]["spans"] if s.lane == "comm"}
    assert {"reduce_scatter_tensor", "all_gather_into_tensor"} <= names
