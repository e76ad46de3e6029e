"""The launcher, as a notebook user meets it: values, output, failures, clean-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

import labsupport as lab
from labsupport.runtime.backend import MAX_WORLD_SIZE, BackendUnavailable
from labsupport.runtime.launch.cluster import RESTART_NOTE


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=4, timeout=30) as c:
        yield c


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _all_gone(pids, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_running(p) for p in pids)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


# ----------------------------------------------------------------------------- values
def test_run_returns_one_value_per_rank_and_accepts_lambdas(cluster):
    import torch.distributed as dist

    assert cluster.run(lambda: dist.get_rank() * 10) == [0, 10, 20, 30]
    offset = 7  # a closure travels by value

    def add(x, y=0):
        return dist.get_rank() + x + y + offset

    assert cluster.run(add, 1, y=2) == [10, 11, 12, 13]


def test_exec_keeps_state_per_rank_and_returns_last_expression(cluster):
    assert cluster.exec("a = rank * 2") == [None] * 4
    assert cluster.exec("a + 1") == [1, 3, 5, 7]
    values = cluster.exec("t = torch.ones(2) * (rank + 1)\ndist.all_reduce(t)\nt")
    assert [v.tolist() for v in values] == [[10.0, 10.0]] * 4


def test_each_rank_starts_with_the_documented_names_and_torchrun_variables(cluster):
    values = cluster.exec(
        "import os\n"
        "(rank, world_size, local_rank, str(device), dist.is_initialized(),"
        " os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'],"
        " os.environ['MASTER_ADDR'])"
    )
    for r, v in enumerate(values):
        assert v == (r, 4, r, "cpu", True, str(r), "4", str(r), "127.0.0.1")


def test_rank_device_matches_the_rank_namespace(cluster):
    from labsupport.runtime.launch import rank_device

    assert [str(d) for d in cluster.run(rank_device)] == ["cpu"] * 4


def test_syntax_error_is_raised_here_and_leaves_the_cluster_alone(cluster):
    cluster.exec("keep = 1")
    with pytest.raises(SyntaxError):
        cluster.exec("def broken(:\n  pass")
    assert cluster.exec("keep") == [1] * 4


# ----------------------------------------------------------------------------- output
def test_output_is_grouped_by_rank_in_order_with_prefixes(cluster, capsys):
    cluster.exec(
        "import time\ntime.sleep(0.05 * (world_size - rank))  # rank 3 prints first\n"
        "print('line one', rank)\nprint('line two', rank)"
    )
    out = capsys.readouterr().out.splitlines()
    expected = [f"[rank {r}] line {w} {r}" for r in range(4) for w in ("one", "two")]
    assert out == expected


def test_c_level_output_and_stderr_are_captured(cluster, capsys):
    cluster.exec(
        "import os, ctypes, sys\n"
        "os.write(1, b'fd one\\n')\n"
        "ctypes.CDLL(None).printf(b'from printf %d\\n', rank)\n"
        "print('to stderr', file=sys.stderr)"
    )
    captured = capsys.readouterr()
    for r in range(4):
        assert f"[rank {r}] fd one" in captured.out
        assert f"[rank {r}] from printf {r}" in captured.out
        assert f"[rank {r}] to stderr" in captured.err


def test_show_limits_printed_ranks_but_code_runs_everywhere(cluster, capsys):
    values = cluster.exec("print('hi', rank)\nrank", show=[0, 3])
    out = capsys.readouterr().out
    assert "[rank 0] hi 0" in out and "[rank 3] hi 3" in out
    assert "[rank 1]" not in out and "[rank 2]" not in out
    assert values == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- failures
def test_a_raising_rank_gives_rank_error_with_traceback_and_a_restart(cluster, capsys):
    cluster.exec("before = 1")
    with pytest.raises(lab.RankError) as info:
        cluster.exec("if rank == 2:\n    raise ValueError('bad value on two')\ndist.barrier()")
    err = info.value
    assert err.ranks == [2] and err.first == 2
    assert "ValueError" in str(err) and "bad value on two" in str(err)
    assert "raise ValueError" in err.errors[2].traceback
    assert err.restarted
    assert set(err.stacks) == {0, 1, 3}
    assert "barrier" in err.stacks[0]
    assert str(err).rstrip().endswith(f"({RESTART_NOTE})")
    assert cluster.exec("'before' in dir()") == [False] * 4  # fresh ranks
    assert cluster.run(lambda: 1) == [1] * 4


def test_an_error_on_every_rank_without_a_hang_keeps_the_state(cluster):
    cluster.exec("kept = rank")
    with pytest.raises(lab.RankError) as info:
        cluster.exec("1 / 0")
    assert info.value.ranks == [0, 1, 2, 3]
    assert not info.value.restarted
    # one traceback, and the same error on the other ranks said once
    assert str(info.value).count("Traceback") == 1
    assert str(info.value).count("ZeroDivisionError: division by zero") == 2
    others = ", ".join(str(r) for r in range(4) if r != info.value.first)
    assert f"ranks {others}: the same error" in str(info.value)
    assert cluster.exec("kept") == [0, 1, 2, 3]


def test_a_hang_gives_collective_timeout_with_each_rank_stack(cluster):
    t0 = time.monotonic()
    with pytest.raises(lab.CollectiveTimeout) as info:
        cluster.exec("buf = torch.zeros(1)\ndist.recv(buf, src=(rank + 1) % world_size)", timeout=3)
    assert time.monotonic() - t0 < 30
    err = info.value
    assert err.ranks == [0, 1, 2, 3]
    for r in range(4):
        assert "dist.recv(buf" in err.stacks[r]
        assert "in recv" in err.stacks[r]
    assert cluster.run(lambda: 2) == [2] * 4  # restarted and usable


def test_a_worker_that_dies_is_reported_and_replaced(cluster):
    pids = cluster.exec("import os\nos.getpid()")
    with pytest.raises(lab.RankError) as info:
        cluster.exec("import os\nif rank == 1:\n    os._exit(3)\ndist.barrier()")
    err = info.value
    assert err.first == 1  # the others may fail too, when their peer vanishes
    assert err.errors[1].type_name == "WorkerDied"
    assert str(err).startswith("rank 1 ")
    assert "code 3" in str(err)
    assert _all_gone(pids)  # killed at once, reaped in the background
    assert cluster.run(lambda: 3) == [3] * 4


def _interrupt_soon(delay: float) -> None:
    def fire():
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()


def test_interrupt_stops_a_python_loop_and_keeps_the_cluster(cluster):
    cluster.exec("kept = 5")
    _interrupt_soon(1.0)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="keep their state"):
        cluster.exec("import time\nwhile True:\n    time.sleep(0.01)", timeout=60)
    assert time.monotonic() - t0 < 10
    assert cluster.exec("kept") == [5] * 4


def test_interrupt_kills_ranks_that_ignore_it_and_restarts(cluster):
    _interrupt_soon(1.0)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="restarted"):
        cluster.exec(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
            timeout=60,
        )
    assert time.monotonic() - t0 < 20
    assert cluster.run(lambda: 4) == [4] * 4


# ----------------------------------------------------------------------------- environment
def test_env_reaches_every_rank():
    with lab.Cluster(world_size=2, env={"COURSE_FLAG": "on"}) as c:
        assert c.exec("import os\nos.environ['COURSE_FLAG']") == ["on", "on"]


def test_nothing_listens_outside_loopback(cluster):
    pids = {p.pid for p in psutil.Process().children(recursive=True)}
    listening = [
        c
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert listening, "expected the rendezvous store to listen somewhere"
    for conn in listening:
        assert conn.laddr.ip in ("127.0.0.1", "::1"), conn


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"world_size": "4"}, TypeError, "whole number"),
        ({"world_size": 2.5}, TypeError, "whole number"),
        ({"world_size": True}, TypeError, "whole number"),
        ({"world_size": 0}, ValueError, "at least 1"),
        ({"world_size": MAX_WORLD_SIZE + 1}, ValueError, f"cap of {MAX_WORLD_SIZE}"),
        ({"backend": "mpi"}, ValueError, "auto, hccl, nccl, gloo"),
        ({"backend": "nccl"}, BackendUnavailable, "GPU"),
        ({"backend": "hccl"}, BackendUnavailable, "torch_npu"),
        ({"timeout": -1}, ValueError, "positive"),
        ({"env": {"A": 1}}, TypeError, "strings"),
    ],
)
def test_bad_input_is_a_clear_error_and_starts_nothing(kwargs, error, words):
    before = _children()
    with pytest.raises(error, match=words):
        lab.Cluster(**{"world_size": 2, **kwargs})
    assert _children() == before


def test_one_shot_run():
    import torch.distributed as dist

    assert lab.run(lambda: dist.get_world_size(), world_size=2) == [2, 2]


# ----------------------------------------------------------------------------- no leftovers
def _fds() -> int:
    return psutil.Process().num_fds()


def _listening() -> set[int]:
    """Ports this process or its children listen on."""
    pids = {os.getpid(), *_children()}
    return {
        c.laddr.port
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }


def test_fifty_start_stop_cycles_leave_nothing_behind():
    lab.Cluster(world_size=1).shutdown()  # warm up lazy imports and threads
    children, fds, ports = _children(), _fds(), _listening()
    for _ in range(50):
        c = lab.Cluster(world_size=1)
        c.shutdown()
    time.sleep(0.5)
    assert _children() == children
    assert _fds() <= fds
    assert _listening() <= ports
    assert lab.current_cluster() is None or lab.current_cluster().alive


def test_workers_exit_when_the_kernel_is_killed(tmp_path):
    script = textwrap.dedent(
        """
        import time, labsupport as lab
        c = lab.Cluster(world_size=2)
        print(" ".join(str(w.proc.pid) for w in c._workers), flush=True)
        time.sleep(120)
        """
    )
    kernel = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        pids = [int(p) for p in kernel.stdout.readline().split()]
        assert len(pids) == 2 and all(_running(p) for p in pids)
        kernel.kill()  # kill -9: no atexit, no cleanup code runs
        kernel.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_running(p) for p in pids):
            time.sleep(0.1)
        assert not any(_running(p) for p in pids), "orphan workers survived"
    finally:
        kernel.kill()
        kernel.stdout.close()


def test_stack_dump_parsing_keeps_the_main_thread_and_the_cell_lines():
    from labsupport.runtime.launch.stacks import main_thread_stack

    dump = (
        "Thread 0x00000000000000aa (most recent call first):\n"
        '  File "/x/labsupport/launch/worker.py", line 30 in _watch_lifeline\n\n'
        "Current thread 0x00000000000000bb (most recent call first):\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",'
        " line 2799 in recv\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py",'
        " line 83 in wrapper\n"
        '  File "<rank-cell-9>", line 2 in <module>\n'
        '  File "/x/labsupport/launch/worker.py", line 120 in _serve\n'
        '  File "<frozen runpy>", line 88 in _run_code\n'
    )
    stack = main_thread_stack(dump, 0xBB)
    frames = [ln.strip() for ln in stack.splitlines() if ln.strip().startswith("File")]
    assert frames == [
        'File "<rank-cell-9>", line 2, in <module>',
        'File "torch/distributed/distributed_c10d.py", line 2799, in recv',
    ]
    assert "worker.py" not in stack and "runpy" not in stack and "c10d_logger" not in stack
    assert main_thread_stack(dump, 0xCC) == ""


def test_a_trailing_semicolon_hides_the_value_as_in_ipython(cluster):
    assert cluster.exec("x_semi = rank\nx_semi;") == [None] * 4
    assert cluster.exec("x_semi") == [0, 1, 2, 3]


def test_the_renamed_collectives_warning_is_not_printed(cluster, capsys):
    cluster.exec(
        "out = torch.zeros(world_size)\n"
        "dist.all_gather_into_tensor(out, torch.tensor([float(rank)]))"
    )
    assert "deprecated" not in capsys.readouterr().err


def test_a_temporary_cluster_hands_current_back_when_it_stops(cluster):
    cluster.exec("pass")  # make sure the module's cluster is up
    assert lab.current_cluster() is cluster
    with lab.Cluster(world_size=1) as temporary:
        assert lab.current_cluster() is temporary
    assert lab.current_cluster() is cluster


def test_remote_tracebacks_are_tidied_for_reading():
    from labsupport.runtime.launch.stacks import tidy_traceback

    raw = (
        "Traceback (most recent call last):\n"
        '  File "<%%ranks cell>", line 2, in <module>\n'
        "    dist.all_reduce(x)\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83,'
        " in wrapper\n"
        "    return func(*args, **kwargs)\n"
        "           ^^^^^^^^^^^^^^^^^^^^^\n"
        '  File "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",'
        " line 3245, in all_reduce\n"
        "    work = group.allreduce([tensor], opts)\n"
        "RuntimeError: boom\n"
    )
    assert tidy_traceback(raw) == (
        "Traceback (most recent call last):\n"
        '  File "<%%ranks cell>", line 2, in <module>\n'
        "    dist.all_reduce(x)\n"
        '  File "torch/distributed/distributed_c10d.py", line 3245, in all_reduce\n'
        "    work = group.allreduce([tensor], opts)\n"
        "RuntimeError: boom\n"
    )


def test_windows_gets_a_clear_error_instead_of_a_broken_start(monkeypatch):
    from labsupport.runtime.launch import cluster as cluster_module

    monkeypatch.setattr(cluster_module.os, "name", "nt")
    before = _children()
    with pytest.raises(RuntimeError, match="WSL2"):
        lab.Cluster(world_size=2)
    assert _children() == before
