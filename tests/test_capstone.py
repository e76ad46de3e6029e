"""labsupport.capstone and its graders: every strategy trains as one process does, and the
graders catch the usual mistakes (gradients not averaged, a missed bucket) with a useful message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import capstone, ddp
from labsupport.capstone import compare, strategies
from labsupport.check import capstone as grader

ROOT = Path(__file__).resolve().parents[1]
CFG = grader.GRADE_CFG


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=2, timeout=120) as c:
        c.run(ddp.use_threads)
        yield c


# ------------------------------------------------------------------ mistakes, on purpose
class NotAveraged(strategies.BucketedDDP):
    """Sums the gradients: forgets to divide by the world size."""

    def _all_reduce(self, tensor, info="", async_op=False):
        self.calls += 1
        return dist.all_reduce(tensor, async_op=async_op)


class MissedBucket(strategies.BucketedDDP):
    """Never sends the last bucket (the first layers' gradients stay local)."""

    def _ready(self, param):
        k = self._bucket_of[id(param)]
        if k < len(self.buckets) - 1:
            super()._ready(param)


class NoBroadcast(strategies.BucketedDDP):
    """Each rank keeps its own random initial weights."""

    def wrap(self, model, make_optimizer):
        ddp.Bucketed.wrap(self, model)
        self.opt = make_optimizer(self.params)
        return model


class ZeroSummed(strategies.ZeRO1):
    """ZeRO-1 whose reduce-scatter sums instead of averaging."""

    def finish(self):
        flat_grad = torch.zeros_like(self.flat)
        torch.cat([p.grad.reshape(-1) for p in self.params], out=flat_grad[: self.numel])
        self.shard.grad = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(self.shard.grad, flat_grad)


class ZeroAllReduce(strategies.ZeRO1):
    """Right numbers, but all-reduces the whole gradient and keeps only its shard."""

    def finish(self):
        flat_grad = torch.zeros_like(self.flat)
        torch.cat([p.grad.reshape(-1) for p in self.params], out=flat_grad[: self.numel])
        dist.all_reduce(flat_grad.div_(dist.get_world_size()))
        self.shard.grad = flat_grad[self.lo : self.hi].clone()


# ------------------------------------------------------------------ the library
@pytest.mark.parametrize("name", ["ddp", "zero1", "torch"])
def test_every_strategy_matches_the_single_process_baseline(cluster, name):
    results = cluster.run(compare.compare_steps, name, 3, CFG, 4096, name == "zero1")
    assert compare.first_divergence(results, sharded=name == "zero1") is None


def test_train_returns_the_global_loss_and_zero1_holds_a_quarter_of_the_state():
    with lab.Cluster(world_size=4, timeout=120) as c:
        c.run(ddp.use_threads)
        plain = c.run(capstone.train, "ddp", 2, CFG, 4096)
        zero = c.run(capstone.train, "zero1", 2, CFG, 4096)
    numel = CFG.param_count()
    assert plain[0]["losses"] == plain[3]["losses"]
    assert plain[0]["losses"] == pytest.approx(zero[0]["losses"], rel=1e-5)
    assert plain[0]["memory"]["optimizer state"] >= 2 * 4 * numel
    assert zero[0]["memory"]["optimizer state"] <= 2 * 4 * (numel // 4 + 4) + 64
    for w_plain, w_zero in zip(plain[0]["weights"], zero[2]["weights"], strict=True):
        assert torch.allclose(w_plain, w_zero, rtol=1e-4, atol=1e-5)


def test_first_divergence_names_the_step_and_the_summed_gradients(cluster):
    results = cluster.run(compare.compare_steps, NotAveraged, 3, CFG, 4096)
    found = compare.first_divergence(results)
    assert found["step"] == 0 and found["what"] == "gradients"
    assert found["ratio"] == pytest.approx(2.0, rel=1e-3)  # 2 ranks: twice the mean


# ------------------------------------------------------------------ the graders
def test_graders_pass_the_reference_solutions(cluster, capsys):
    assert grader.check_ddp(strategies.BucketedDDP, cluster)
    assert grader.check_zero1(strategies.ZeRO1, cluster)
    assert capsys.readouterr().out.count("PASS") == 2


def test_ddp_grader_says_gradients_were_summed(cluster):
    result = grader.check_ddp(NotAveraged, cluster)
    assert not result
    assert "step 0" in result.message and "summed, not averaged" in result.message


def test_ddp_grader_names_the_missed_bucket(cluster):
    result = grader.check_ddp(MissedBucket, cluster)
    assert not result
    assert "Exactly the parameters of bucket" in result.message
    assert "tok.weight" in result.message or "more" in result.message


def test_ddp_grader_asks_for_the_broadcast(cluster):
    result = grader.check_ddp(NoBroadcast, cluster)
    assert not result and "before the first step" in result.message
    assert "broadcast rank 0's parameters" in result.message


def test_zero_grader_catches_summing_and_all_reduce(cluster):
    summed = grader.check_zero1(ZeroSummed, cluster)
    assert not summed and "summed, not averaged" in summed.message
    reduced = grader.check_zero1(ZeroAllReduce, cluster)
    assert not reduced and "reduce_scatter_tensor" in reduced.message


def test_a_stub_is_not_implemented_yet(cluster):
    class Stub(strategies.Strategy):
        def __init__(self, bucket_bytes=0):
            super().__init__()

        def finish(self):
            raise NotImplementedError("Exercise 10.1")

    result = grader.check_ddp(Stub, cluster)
    assert not result and not result.implemented


# ------------------------------------------------------------------ torchrun
def test_example_runs_under_torchrun_on_two_cpu_ranks():
    torchrun = Path(sys.executable).with_name("torchrun")
    for strategy in ("ddp", "zero1"):
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

    from labsupport.check.notebooks import load_answers

    nb = nbformat.read(ROOT / "notebooks/solutions/10_capstone.ipynb", as_version=4)
    _edit_cell(nb, "10.2", "def finish(self):", "def finish(self)")
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
    _edit_cell(summed, "10.1", ".div_(dist.get_world_size())", "")
    nbformat.write(summed, tmp_path / "carol.ipynb")
    cmd = [sys.executable, "-m", "labsupport.check.capstone", "grade", str(tmp_path),
           "--ranks", "2", "--timeout", "60", "--gradebook", str(tmp_path / "g.csv")]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["alice", "bob", "carol"]
    assert lines[0] == "alice: 10.1 PASS  10.2 PASS"
    assert lines[1].startswith("bob: 10.1 TODO  10.2 TODO") and "not implemented yet" in lines[1]
    assert lines[2].startswith("carol: 10.1 FAIL  10.2 PASS") and "step 0" in lines[2]


def test_the_folder_command_refuses_a_folder_without_notebooks(tmp_path):
    cmd = [sys.executable, "-m", "labsupport.check.capstone", "grade", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no .ipynb files" in done.stderr


# ------------------------------------------------------------------ timing, timeline, traffic
def test_time_steps_traces_zero1s_collectives_and_netem_counts_ring_traffic():
    from labsupport import netem

    fast = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
    with lab.Cluster(world_size=2, timeout=120, network=fast) as c:
        c.run(ddp.use_threads)
        timed = c.run(capstone.time_steps, "zero1", 2, 1, CFG)
        sent = {s: c.run(capstone.traffic_per_step, s, 2, CFG, 4096)[0] for s in ("ddp", "zero1")}
    assert timed[0]["seconds"] == timed[1]["seconds"]  # the slowest rank's, everywhere
    names = {s.name for s in timed[0]["spans"] if s.lane == "comm"}
    assert {"reduce_scatter_tensor", "all_gather_into_tensor"} <= names
    psi = CFG.param_bytes()
    assert sent["ddp"] == pytest.approx(psi, rel=0.01)  # 2(p-1)/p·Ψ with p = 2
    assert sent["zero1"] == pytest.approx(sent["ddp"], rel=0.01)
