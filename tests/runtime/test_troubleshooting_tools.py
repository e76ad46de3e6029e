"""labsupport.runtime.diagnose (one line per rank from a failure) and labsupport.runtime.torchrun
(bounded torchrun launchers that leave no process behind)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from labsupport.runtime import diagnose
from labsupport.runtime.launch import CollectiveTimeout, RankError, RemoteError
from labsupport.runtime.torchrun import free_port, port_in_use, run_torchrun

SCRIPT = str(Path(__file__).resolve().parents[2] / "examples" / "hello_ranks.py")

_STACK = """Stack (most recent call last):
  File "<%%ranks cell 3>", line {line}, in <module>
    {src}
  File "torch/distributed/distributed_c10d.py", line 3252, in {call}
    work.wait()"""


def test_where_blocked_names_the_line_and_the_call_and_the_missing_rank():
    err = CollectiveTimeout(
        3,
        {
            0: _STACK.format(line=4, src="dist.all_reduce(x)", call="all_reduce"),
            1: _STACK.format(line=5, src="dist.barrier()", call="barrier"),
        },
    )
    lines = diagnose.where_blocked(err, world_size=3)
    assert lines[0] == "line 4 `dist.all_reduce(x)`, waiting in all_reduce"
    assert lines[1] == "line 5 `dist.barrier()`, waiting in barrier"
    assert lines[2] == "finished the cell (not blocked)"


def test_mismatch_aspects_keeps_what_differs_and_skips_other_errors():
    detail = (
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[2]), but Rank 1 "
        "is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, "
        "TensorShape=[3]).Collectives differ in the following aspects:   "
        "Tensor Tensor shapes: 2vs 3"
    )
    err = RankError(
        {
            0: RemoteError(0, "RuntimeError", detail, ""),
            1: RemoteError(1, "RuntimeError", "Connection closed by peer", ""),
        }
    )
    assert diagnose.mismatch_aspects(err) == {0: "shapes 2 vs 3"}


def test_detail_summary_reads_torchs_run_together_words():
    tail = (
        "Collectives differ in the following aspects:   Op type: ALLREDUCEvs REDUCE  "
        "Tensor Tensor shapes: 3vs   Tensor Tensor dtypes: Floatvs   Tensor Tensor devices: "
        "TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), "
        "requires_grad=false (default), pinned_memory=false (default), "
        "memory_format=(nullopt))vs"
    )
    message = "Detected mismatch between collectives on ranks. ..." + tail
    assert diagnose.detail_summary(message) == (
        "op type ALLREDUCE vs REDUCE; shapes 3 vs (none); dtypes Float vs (none); "
        "devices cpu vs (none)"
    )
    assert diagnose.detail_summary("Connection closed by peer") is None


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _no_new_children(before: set[int]) -> bool:
    """No process started during the test is left (other tests' groups may still run)."""
    return not (_children() - before)


def test_a_port_in_use_fails_fast_with_torchruns_own_error():
    before = _children()
    with port_in_use() as busy:
        (run,) = run_torchrun(
            [["--nnodes=1", "--nproc-per-node=1", f"--master-port={busy}", SCRIPT]], timeout=120
        )
    assert run.returncode not in (0, None)
    assert "EADDRINUSE" in run.error_line()
    assert _no_new_children(before)


def test_a_launcher_still_waiting_at_the_deadline_is_killed_with_its_session():
    job = ["--nnodes=2", "--node-rank=0", "--nproc-per-node=1", "--master-addr=127.0.0.1"]
    job += [f"--master-port={free_port()}", "--rdzv-conf=timeout=120", SCRIPT]
    before = _children()
    (run,) = run_torchrun([job], timeout=3)
    assert run.returncode is None
    assert "killed" in run.error_line()
    assert _no_new_children(before)


def test_a_bad_timeout_is_refused():
    with pytest.raises(ValueError, match="positive"):
        run_torchrun([["--help"]], timeout=0)


def test_hello_ranks_runs_under_torchrun_and_each_rank_reports_its_local_rank():
    before = _children()
    (run,) = run_torchrun([["--standalone", "--nproc-per-node=2", SCRIPT]], timeout=180)
    assert run.returncode == 0, run.output[-2000:]
    for rank in (0, 1):
        assert f"RANK {rank} of WORLD_SIZE 2" in run.output
        assert f"LOCAL_RANK {rank}, device cpu; sum of ranks 1 (expected 1)" in run.output
    assert _no_new_children(before)


def test_torchrun_result_reads_a_bare_error_and_the_root_cause():
    from labsupport.runtime.torchrun import TorchrunResult

    bare = TorchrunResult((), 1, 3.0, "Traceback ...\ntorch.distributed.elastic.rendezvous.api."
                          "RendezvousTimeoutError\n")  # fmt: skip
    assert bare.error_line() == (
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError (raised with no message)"
    )
    summary = (
        "ValueError: boom\nChildFailedError: \n=====\nscript.py FAILED\n-----\n"
        "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : 1 (pid: 9)\n=====\n"
    )
    failed = TorchrunResult((), 1, 3.0, summary)
    assert failed.error_line() == "ValueError: boom"
    assert failed.root_cause().splitlines() == [
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : 1 (pid: 9)",
    ]
    assert TorchrunResult((), 0, 1.0, "ok\n").root_cause() == ""
