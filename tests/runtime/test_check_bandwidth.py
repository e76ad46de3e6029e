"""Exercise 06.1's grader: a fixed benchmark passes; each of the four bugs fails, named."""

import time

import pytest
import torch
import torch.distributed as dist

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/

from labsupport.runtime import bench  # noqa: E402
from labsupport.runtime.check.bandwidth import check_fixed_benchmark  # noqa: E402


def benchmark(x, iters, warmup=True, sync=True, op=dist.ReduceOp.MAX, factor=None, clock=None):
    clock = clock or time.perf_counter
    p = dist.get_world_size()
    size = x.numel() * x.element_size()
    if warmup:
        for _ in range(3):
            dist.all_reduce(x)
    if sync:
        bench.synchronize(x.device)
    dist.barrier()
    if sync:
        bench.synchronize(x.device)
    start = clock()
    for _ in range(iters):
        dist.all_reduce(x)
    if sync:
        bench.synchronize(x.device)
    seconds = (clock() - start) / iters
    t = torch.tensor([seconds], device=x.device, dtype=torch.float64)
    if op is not None:
        dist.all_reduce(t, op=op)
    algbw = size / t.item() / 1e9
    return t.item(), algbw, algbw * (factor if factor is not None else 2 * (p - 1) / p)


def fixed(x, iters):
    return benchmark(x, iters)


def fixed_with_time_time(x, iters):
    return benchmark(x, iters, clock=time.time)


def no_sync(x, iters):
    return benchmark(x, iters, sync=False)


def no_warmup(x, iters):
    return benchmark(x, iters, warmup=False)


def fastest_rank(x, iters):
    return benchmark(x, iters, op=dist.ReduceOp.MIN)


def own_time(x, iters):
    return benchmark(x, iters, op=None)


def factor_two(x, iters):
    return benchmark(x, iters, factor=2.0)


def broken(x, iters):
    """The notebook's broken benchmark: all four bugs at once."""
    return benchmark(x, iters, warmup=False, sync=False, op=dist.ReduceOp.MIN, factor=2.0)


@pytest.fixture(scope="module")
def cluster():
    lab = pytest.importorskip("labsupport")
    with lab.Cluster(2, backend="gloo", timeout=60) as c:
        yield c


@pytest.mark.parametrize("fn", [fixed, fixed_with_time_time])
def test_a_fixed_benchmark_agrees_with_bench(cluster, fn):
    result = check_fixed_benchmark(fn, cluster)
    assert result.passed, result.message
    assert "agrees with labsupport.runtime.bench" in result.message


@pytest.mark.parametrize(
    "fn, words",
    [
        (broken, ["never synchronized"]),
        (no_sync, ["never synchronized", "bench.synchronize"]),
        (no_warmup, ["too long", "Warm up first"]),
        (fastest_rank, ["fastest rank's time", "MAX"]),
        (own_time, ["each rank returned its own time", "rank 1:"]),
        (factor_two, ["busbw / algbw is 2", "2(p-1)/p"]),
    ],
)
def test_each_bug_fails_with_a_message_that_names_it(cluster, fn, words):
    result = check_fixed_benchmark(fn, cluster)
    assert not result.passed
    for w in words:
        assert w in result.message, result.message


def _clock_and_all_reduce():
    from labsupport.runtime import device

    return (
        type(time.perf_counter).__name__ == "builtin_function_or_method",  # the real clock
        type(time.sleep).__name__ == "builtin_function_or_method",
        "simulated" not in dist.all_reduce.__qualname__,
        device.device_module("cpu") is None,
    )


def test_the_simulation_leaves_the_clock_and_dist_as_they_were(cluster):
    check_fixed_benchmark(broken, cluster)
    assert cluster.run(_clock_and_all_reduce) == [(True, True, True, True)] * 2


def test_other_threads_keep_the_real_clock():
    import threading

    from labsupport.runtime.check.bandwidth import simulated_device

    seen = []
    with simulated_device(0):
        simulated = time.perf_counter()
        worker = threading.Thread(target=lambda: seen.append(time.perf_counter()))
        worker.start()
        worker.join()
    assert simulated < 1.0 and seen[0] == pytest.approx(time.perf_counter(), abs=5.0)
