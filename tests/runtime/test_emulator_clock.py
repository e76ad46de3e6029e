"""The emulated clock: what a rank's code reads while a network is emulated.

In-process tests check the clock itself (CPU time moves it, waiting does not,
sleep and compute move it by what they say, other threads keep the real
clock); cluster tests check what a learner sees: a collective reads the link
model's time beside busy processes, wire time is not slept, overlap hides
communication, torch's DDP and PowerSGD see their collectives' ends, and a hang
is still reported on the real clock.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import labsupport as lab
from labsupport import netem
from labsupport.netem import Link, Network
from labsupport.runtime import emulator
from labsupport.runtime.emulator import clock


@pytest.fixture
def emulated() -> Iterator[None]:
    """This test's thread reads an emulated clock; the real clocks come back afterwards."""
    import torch

    threads = torch.get_num_threads()
    clock.install()
    try:
        yield
    finally:
        clock.uninstall()
        torch.set_num_threads(threads)


def _spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_cpu_time_moves_the_clock_and_blocking_does_not(emulated) -> None:
    t0 = time.perf_counter()
    clock.REAL.sleep(0.05)  # blocked, as on a core another rank holds: costs nothing
    t1 = time.perf_counter()
    _spin(0.02)
    t2 = time.perf_counter()
    assert t1 - t0 < 0.005
    assert 0.02 <= t2 - t1 < 0.03
    assert time.monotonic() == pytest.approx(time.perf_counter(), abs=0.005)
    assert time.perf_counter_ns() == pytest.approx(time.perf_counter() * 1e9, abs=5e6)


def test_sleep_moves_the_clock_and_compute_moves_it_without_sleeping(emulated) -> None:
    t0, real0 = time.perf_counter(), clock.REAL.perf_counter()
    time.sleep(0.03)
    t1, real1 = time.perf_counter(), clock.REAL.perf_counter()
    emulator.compute(2.0)
    t2, real2 = time.perf_counter(), clock.REAL.perf_counter()
    assert 0.03 <= t1 - t0 < 0.035 and real1 - real0 >= 0.03  # sleep still sleeps
    assert 2.0 <= t2 - t1 < 2.005 and real2 - real1 < 0.5  # compute does not


def test_a_join_moves_the_clock_forward_never_back(emulated) -> None:
    now = clock.now()
    assert clock.join(now + 5.0) >= now + 5.0
    assert clock.join(0.0) >= now + 5.0
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1.0)


def test_work_inside_hidden_is_not_charged(emulated) -> None:
    t0 = time.perf_counter()
    with clock.hidden():
        _spin(0.02)
        clock.join(t0 + 0.001)  # an operation that ended meanwhile still counts
    assert 0.001 <= time.perf_counter() - t0 < 0.005


def test_other_threads_and_time_time_keep_the_real_clock(emulated) -> None:
    import datetime

    before = time.perf_counter()
    clock.advance(1000.0)
    assert time.perf_counter() - before >= 1000.0
    seen = {}
    thread = threading.Thread(target=lambda: seen.update(t=time.monotonic()))
    thread.start()
    thread.join()
    assert seen["t"] == pytest.approx(clock.REAL.monotonic(), abs=1.0)
    assert time.time() == pytest.approx(datetime.datetime.now().timestamp(), abs=1.0)


def test_uninstall_gives_the_real_clocks_back() -> None:
    clock.install()
    clock.uninstall()
    assert time.perf_counter is clock.REAL.perf_counter and time.sleep is clock.REAL.sleep
    assert not clock.emulated()


# ------------------------------------------------------------------ on a cluster
SLOW = netem.PRESETS["slow-ethernet"]  # 1 ms, 50 MB/s, one NIC per rank


def timed_all_reduces(nbytes: int, iters: int) -> dict:
    """On every rank: the slowest rank's time of each all-reduce, its CPU reductions, and the
    real and emulated time all of it took."""
    import time

    import torch

    from labsupport.runtime import emulator
    from labsupport.runtime.bench.timing import time_iterations

    x = torch.ones(nbytes // 4)
    before, wall, emulated = (
        emulator.traffic()["reduce_seconds"],
        emulator.clock.REAL.perf_counter(),
        time.perf_counter(),
    )
    timing = time_iterations(lambda i: torch.distributed.all_reduce(x), iters, warmup=2)
    reduce = (emulator.traffic()["reduce_seconds"] - before) / (iters + 2)
    wall, emulated = emulator.clock.REAL.perf_counter() - wall, time.perf_counter() - emulated
    return {"seconds": timing.seconds, "reduce": reduce, "wall": wall, "emulated": emulated}


@pytest.fixture(scope="module")
def slow_pair() -> Iterator[lab.Cluster]:
    with lab.Cluster(2, network=SLOW, timeout=120) as cluster:
        yield cluster


def test_an_all_reduce_reads_the_link_model_beside_busy_processes(slow_pair) -> None:
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        out = slow_pair.run(timed_all_reduces, 64 << 10, 8)[0]
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    model = netem.model_time("all_reduce", "ring", 64 << 10, 2, SLOW)
    ratio = statistics.median(out["seconds"]) / (model + out["reduce"])
    assert 0.99 < ratio < 1.05, (out, model)


def test_wire_time_is_not_slept(slow_pair) -> None:
    slower = Network(inter=Link(1e-3, 5e6), ranks_per_node=1)  # 16 MiB: 3.4 s a call
    slow_pair.run(emulator.set_network, slower)
    try:
        out = slow_pair.run(timed_all_reduces, 16 << 20, 2)[0]
    finally:
        slow_pair.run(emulator.set_network, SLOW)
    assert out["emulated"] >= 4 * netem.model_time("all_reduce", "ring", 16 << 20, 2, slower)
    assert out["wall"] < out["emulated"] / 4  # four 16 MiB all-reduces, in far less real time


def overlapped(seconds: float, nbytes: int) -> dict:
    """On every rank: an all-reduce issued before compute and waited for after it."""
    import time

    import torch
    import torch.distributed as dist

    from labsupport.runtime import emulator

    x = torch.ones(nbytes // 4)
    dist.barrier()
    t0 = time.perf_counter()
    work = dist.all_reduce(x, async_op=True)
    emulator.compute(seconds)
    t1 = time.perf_counter()
    work.wait()
    t2 = time.perf_counter()
    return {"compute": t1 - t0, "total": t2 - t0}


def test_communication_overlaps_emulated_compute(slow_pair) -> None:
    comm = netem.model_time("all_reduce", "ring", 1 << 20, 2, SLOW)  # about 23 ms
    short = slow_pair.run(overlapped, comm / 2, 1 << 20)
    long = slow_pair.run(overlapped, comm * 2, 1 << 20)
    for rank in short:
        assert comm * 0.99 <= rank["total"] < comm * 1.1  # compute hidden behind the wire
    for rank in long:
        assert comm * 2 <= rank["total"] < comm * 2 + 0.005  # the wire hidden behind compute


def ddp_step_times(hook: str) -> list[float]:
    """On every rank: torch DDP steps (one bucket), each timed from a barrier, with ``hook``."""
    import time

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)), bucket_cap_mb=64)
    if hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        state = psgd.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=2)
        model.register_comm_hook(state, psgd.powerSGD_hook)
    x, seconds = torch.randn(8, 256), []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        model(x).sum().backward()
        seconds.append(time.perf_counter() - t0)
    return seconds


def test_torch_ddp_backward_ends_after_its_all_reduce(slow_pair) -> None:
    nbytes = (256 * 256 + 256 + 256 * 8 + 8) * 4
    comm = netem.model_time("all_reduce", "ring", nbytes, 2, SLOW)
    plain, fp16, powersgd = (
        slow_pair.run(ddp_step_times, h)[0] for h in ("none", "fp16", "powersgd")
    )
    assert min(plain) >= comm  # the Reducer waits in C++: the clock still joins its futures
    assert min(fp16) >= netem.model_time("all_reduce", "ring", nbytes // 2, 2, SLOW)
    assert min(fp16) < min(plain)
    # PowerSGD from its third step: three all-reduces one after the other (the biases,
    # P, Q), two of them issued from callbacks, each at least two latencies on 2 ranks
    assert powersgd[-1] >= 3 * 2 * SLOW.inter.latency


def test_a_hang_is_still_reported_on_the_real_clock(slow_pair) -> None:
    start = clock.REAL.monotonic()
    with pytest.raises(lab.CollectiveTimeout):
        slow_pair.exec("dist.recv(torch.zeros(1), src=(rank + 1) % world_size)", timeout=3)
    assert clock.REAL.monotonic() - start < 30
