"""The launcher when things go wrong (issue 8): the right line, at once, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

import labsupport as lab
from labsupport.runtime.launch import ClusterStopped, lifecycle


@pytest.fixture(scope="module")
def pair():
    with lab.Cluster(world_size=2, timeout=30) as c:
        yield c


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------ 1. the right line
# (named as %%ranks names its cells: every cell used to get the same file name)
def test_a_traceback_shows_the_line_of_the_cell_that_defined_the_function(pair):
    pair.exec("def divide(a, b):\n    return a // b", name="%%ranks cell")
    with pytest.raises(lab.RankError) as info:
        pair.exec("y = 2\ndivide(1, 0)", name="%%ranks cell")
    tb = info.value.errors[0].traceback
    assert "return a // b" in tb
    assert tb.count("divide(1, 0)") == 1  # the calling line, once; not shown for divide's frame


def test_a_hang_stack_shows_the_line_of_the_cell_that_defined_the_function(pair):
    pair.exec(
        "def wait_for_peer():\n"
        "    buf = torch.zeros(1)\n"
        "    dist.recv(buf, src=(rank + 1) % world_size)",
        name="%%ranks cell",
    )
    with pytest.raises(lab.CollectiveTimeout) as info:
        pair.exec("x = 1\nwait_for_peer()", timeout=3, name="%%ranks cell")
    for rank in (0, 1):
        assert "dist.recv(buf, src=(rank + 1) % world_size)" in info.value.stacks[rank]


# ------------------------------------------------------------------ 2. report at once
def test_a_failing_cell_reports_at_once_and_the_next_cell_runs(pair):
    t0 = time.monotonic()
    with lab.Cluster(world_size=2, standby=False) as fresh:
        cold = time.monotonic() - t0
        t0 = time.monotonic()
        with pytest.raises(lab.RankError) as info:
            fresh.exec("if rank == 1:\n    raise ValueError('boom')\ndist.barrier()")
        to_error = time.monotonic() - t0
        assert info.value.restarted
        assert fresh.exec("rank") == [0, 1]
    # today the error waited for a 2 s grace and a whole restart (more than a cold start)
    assert to_error < max(1.5, 0.5 * cold), (to_error, cold)


def test_a_failed_restart_never_hides_the_error(pair, monkeypatch):
    with lab.Cluster(world_size=2, standby=False) as c:

        class NoGroup:
            def __init__(self, *args, **kwargs):
                raise OSError("out of processes")

        monkeypatch.setattr(lifecycle, "Group", NoGroup)  # where new groups are started
        with pytest.raises(lab.RankError, match="ValueError") as info:
            c.exec("if rank == 0:\n    raise ValueError('the real error')\ndist.barrier()")
        assert "the real error" in str(info.value)
        assert "could not be started yet: OSError: out of processes" in str(info.value)
        with pytest.raises(OSError, match="out of processes"):
            c.exec("1")
        monkeypatch.undo()
        assert c.exec("rank") == [0, 1]


def test_options_are_kept_after_a_failure(tmp_path):
    with lab.Cluster(world_size=2, timeout=7, env={"COURSE_KEEP": "yes"}) as c:
        with pytest.raises(lab.RankError):
            c.exec("import os\nif rank == 1:\n    os._exit(1)\ndist.barrier()")
        assert (c.world_size, c.timeout, c.env) == (2, 7.0, {"COURSE_KEEP": "yes"})
        assert c.exec("import os\nos.environ['COURSE_KEEP']") == ["yes", "yes"]


def test_a_cluster_shut_down_on_purpose_says_so():
    c = lab.Cluster(world_size=1)
    c.shutdown()
    with pytest.raises(ClusterStopped, match="was shut down"):
        c.exec("1")


# ------------------------------------------------------------------ 3. no orphans
@pytest.mark.parametrize("how", ["restart", "failure", "shutdown"])
def test_a_ranks_child_process_dies_with_it(how):
    c = lab.Cluster(world_size=2, standby=False)
    try:
        pids = c.exec("import subprocess\nsubprocess.Popen(['sleep', '300']).pid")
        if how == "restart":
            c.restart()
        elif how == "failure":
            with pytest.raises(lab.RankError):
                c.exec("import os\nif rank == 0:\n    os._exit(1)\ndist.barrier()")
    finally:
        c.shutdown()
    assert all(_gone(pid) for pid in pids)


# ------------------------------------------------------------------ 4. replies match their task
def test_a_late_reply_to_an_earlier_cell_is_dropped(pair):
    earlier = pair._task_id  # the id of the request before this one
    values = pair.exec(
        "import os, cloudpickle\n"
        "from multiprocessing.connection import Connection\n"
        "ctl = Connection(os.dup(int(os.environ['LABSUPPORT_CTL_FD'])))\n"
        f"ctl.send(('result', {earlier}, 'ok', cloudpickle.dumps('stale'), []))\n"
        "ctl.close()\n"
        "'fresh'"
    )
    assert values == ["fresh", "fresh"]


# ------------------------------------------------------------------ 5. output
def test_ten_megabytes_of_output_are_bounded_and_fast(pair, capsys):
    t0 = time.monotonic()
    pair.exec(
        "import sys\n"
        "sys.stdout.write('first line\\n')\n"
        "sys.stdout.write(('x' * 99 + '\\n') * 100_000)\n"  # 10 MB per rank
        "sys.stdout.write('last line\\n')"
    )
    elapsed = time.monotonic() - t0
    out = capsys.readouterr().out
    assert elapsed < 15, elapsed  # today: tens of seconds, and 20 MB in the notebook
    assert len(out) < 1_300_000
    for rank in (0, 1):
        assert f"[rank {rank}] first line" in out
        assert f"[rank {rank}] last line" in out
    assert out.count("bytes left out") == 2


def test_a_long_cell_shows_output_while_it_runs(pair, monkeypatch):
    writes: list[tuple[float, str]] = []

    class Recorder:
        def write(self, text):
            writes.append((time.monotonic(), text))

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Recorder())
    pair.exec("import time\nprint('before the sleep', flush=True)\ntime.sleep(3)\nprint('after')")
    end = time.monotonic()
    first = [t for t, text in writes if "before the sleep" in text]
    assert first and end - first[0] > 1.5  # shown while the cell still ran


def test_utf8_cut_at_a_read_boundary_or_the_end_loses_nothing():
    from labsupport.runtime.launch.output import StreamReader

    r, w = os.pipe()
    reader = StreamReader(r, "test", limit=10_000)
    text = "héllo → wörld\n".encode()
    for i in range(len(text)):  # one byte per write: every character cut
        os.write(w, text[i : i + 1])
        time.sleep(0.002)
    os.write(w, "€".encode()[:2])  # a character cut by the end of the stream
    os.close(w)
    reader.join()
    captured = reader.collect(0)
    assert captured.head + captured.tail == "héllo → wörld\n\ufffd"


# ------------------------------------------------------------------ 6. error paths
def test_a_rank_that_fails_to_start_shows_its_stderr(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import os, sys
            if os.environ.get("RANK") == "1":
                sys.stderr.write("fake HCCL: device 1 is busy\\n")
                sys.stderr.flush()
                os._exit(5)
            """
        )
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(RuntimeError) as info:
        lab.Cluster(world_size=2, env={"PYTHONPATH": str(tmp_path)})
    assert "rank 1 exited with code 5 while starting" in str(info.value)
    assert "fake HCCL: device 1 is busy" in str(info.value)
    time.sleep(0.5)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_the_users_pythonpath_is_merged(tmp_path):
    (tmp_path / "course_helper_mod.py").write_text("VALUE = 41\n")
    with lab.Cluster(world_size=1, env={"PYTHONPATH": str(tmp_path)}) as c:
        assert c.exec("import course_helper_mod, labsupport\ncourse_helper_mod.VALUE + 1") == [42]


def test_a_rank_killed_by_a_signal_names_it(pair):
    with pytest.raises(lab.RankError) as info:
        pair.exec("import os, signal\nif rank == 1:\n    os.kill(os.getpid(), signal.SIGKILL)")
    assert "rank 1 was killed by SIGKILL (often the out-of-memory killer)" in str(info.value)


def test_sys_exit_on_a_rank_names_the_exit_code(pair):
    pair.exec("kept_exit = 1")
    with pytest.raises(lab.RankError) as info:
        pair.exec("import sys\nsys.exit(3)")
    assert "exit code 3" in str(info.value)
    assert pair.exec("kept_exit") == [1, 1]


def test_a_value_that_cannot_be_pickled_says_what_to_do(pair):
    with pytest.raises(lab.RankError) as info:
        pair.exec("(x for x in range(3))")
    message = str(info.value)
    assert "generator" in message and ".tolist()" in message


def test_a_function_that_cannot_be_sent_names_what_it_captured(pair):
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"cannot send the function .*lock \(lock\)"):
        pair.run(lambda: lock.locked())
    with pytest.raises(TypeError, match="a Cluster lives in the notebook's kernel"):
        pair.run(lambda: pair.world_size)
    with pytest.raises(TypeError, match=r"cannot send argument 1 \(lock\)"):
        pair.run(print, lock)


# ------------------------------------------------------------------ 7. hidden limits
def test_a_cell_may_take_longer_than_the_cluster_default(pair):
    limit = pair.exec("import os\nfloat(os.environ['LABSUPPORT_PG_TIMEOUT'])")[0]
    assert limit >= 600 + 60  # the process group itself waits long enough
    assert pair.exec("1", timeout=600) == [1, 1]
    with pytest.raises(ValueError, match=r"lab.Cluster\(timeout=100000\)"):
        pair.exec("1", timeout=100_000)


def test_interrupt_message_warns_about_queued_messages(pair):
    def fire():
        time.sleep(1.0)
        os.kill(os.getpid(), __import__("signal").SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    with pytest.raises(KeyboardInterrupt, match="stays queued"):
        pair.exec("import time\nwhile True:\n    time.sleep(0.01)")


def test_workers_of_a_killed_kernel_take_their_children_along(tmp_path):
    script = textwrap.dedent(
        """
        import labsupport as lab
        c = lab.Cluster(world_size=1)
        print(c.exec("import subprocess\\nsubprocess.Popen(['sleep', '300']).pid")[0], flush=True)
        c.shutdown()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert _gone(int(out.stdout.strip().splitlines()[-1]))


def test_detail_mismatch_summary_keeps_what_differs():
    """torch's DETAIL message ends with the key fact; the RankError summary line shows it."""
    from labsupport.runtime.launch.errors import RankError, RemoteError

    fingerprint = "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[{}], " + (
        "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, "
        "layout=Strided (default), requires_grad=false (default)))"
    )
    message = (
        "Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        + fingerprint.format(3)
        + ", but Rank 0 is running collective: "
        + fingerprint.format(2)
        + ".Collectives differ in the following aspects: \t Tensor Tensor shapes: 3vs 2"
    )
    error = RankError({1: RemoteError(1, "RuntimeError", message, "Traceback ...")})
    first = str(error).splitlines()[0]
    assert first.endswith("Detected mismatch between collectives on ranks: Tensor shapes: 3 vs 2")
    assert len(first) <= 122


def test_identical_stacks_are_shown_once():
    """Blocked ranks stopped at the same line share one stack in the message, not one each."""
    from labsupport.runtime.launch.errors import CollectiveTimeout, RankError, RemoteError

    head = 'Stack (most recent call last):\n  File "<cell>", '
    same = head + "line 3, in <module>\n    dist.barrier()\n"
    other = head + "line 5, in <module>\n    dist.recv(x)\n"
    error = RankError(
        {1: RemoteError(1, "ValueError", "on purpose", "Traceback ...")},
        stacks={0: same, 2: same, 3: other},
    )
    text = str(error)
    assert "--- ranks 0, 2 were still blocked here ---" in text
    assert "--- rank 3 was still blocked here ---" in text
    assert text.count("dist.barrier()") == 1
    timeout = CollectiveTimeout(3, {0: same, 1: same, 2: same})
    assert "--- ranks 0, 1, 2 stack (the same on each) ---" in str(timeout)
    assert str(timeout).count("dist.barrier()") == 1
