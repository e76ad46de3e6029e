"""The timing helpers of notebooks 03 and 06 wait for the device before they read the clock.

On a CPU with gloo a missing synchronize changes nothing you can see, so these
tests take each helper's source from the notebook's py:percent twin and run it
on a 1-rank gloo group inside :func:`labsupport.runtime.check.bandwidth.simulated_device`:
a virtual clock on which all_reduce returns at once and the (pretend) device
works later. A helper that synchronizes measures the device's time; one that
does not measures only the launch.
"""

import ast
import statistics
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from labsupport.runtime import bench
from labsupport.runtime.check import bandwidth as sim
from labsupport.runtime.check.ring import counting_sends
from labsupport.runtime.launch import rank_device

SOLUTIONS = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def notebook_functions(notebook: str, *names: str) -> dict:
    """The named top-level functions of a notebook's .py twin, defined in a fresh namespace."""
    tree = ast.parse((SOLUTIONS / notebook).read_text())
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    assert sorted(f.name for f in found) == sorted(names), f"{notebook} lost a helper"
    namespace = {
        "torch": torch, "dist": dist, "bench": bench, "time": time, "statistics": statistics,
        "rank_device": rank_device, "counting_sends": counting_sends,
    }  # fmt: skip
    exec(compile(ast.Module(found, type_ignores=[]), notebook, "exec"), namespace)
    return namespace


def device_seconds(numel: int) -> float:
    """What one all_reduce of ``numel`` float32 costs on rank 0's simulated device."""
    return sim.LATENCY_S + numel * 4 / sim.BANDWIDTH_BPS


@pytest.fixture(scope="module")
def one_rank():
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_a_helper_without_synchronize_is_caught(one_rank):
    """The negative control: timing the calls alone measures the launch, far below the device."""
    x = torch.ones(2**16)
    with sim.simulated_device(0) as device:
        dist.all_reduce(x)
        start = time.perf_counter()
        dist.all_reduce(x)
        seconds = time.perf_counter() - start
    assert device.synchronizes == 0 and seconds < device_seconds(x.numel()) / 10


def test_notebook_03_trial_waits_for_the_device(one_rank):
    trial = notebook_functions("03_ring_allreduce.py", "trial")["trial"]
    numel = 2**16
    with sim.simulated_device(0) as device:
        right, sent, seconds = trial(lambda t: dist.all_reduce(t) or t, numel, iters=4)
    assert right and device.synchronizes >= 2
    assert seconds == pytest.approx(device_seconds(numel), rel=0.05)


def test_notebook_06_helpers_wait_for_the_device(one_rank):
    ns = notebook_functions("06_measuring_bandwidth.py", "one_call", "time_with_a_late_rank")
    x = torch.ones(2**16)
    with sim.simulated_device(0) as device:
        dist.all_reduce(x)  # the set-up cost, out of the way
        seconds = ns["one_call"](lambda: dist.all_reduce(x), torch.device("cpu"))
    assert device.synchronizes >= 2
    assert seconds == pytest.approx(sim.LAUNCH_S + device_seconds(x.numel()), rel=0.02)

    for line_up, syncs in ((False, 2), (True, 4)):
        with sim.simulated_device(0) as device:
            ms = ns["time_with_a_late_rank"](line_up)
        assert device.synchronizes >= syncs
        # the launch and the device's work, not the launch alone
        assert ms / 1e3 == pytest.approx(sim.LAUNCH_S + device_seconds(1024), rel=0.02)


def test_notebook_06_exercise_solution_passes_its_own_standard(one_rank):
    fixed = notebook_functions("06_measuring_bandwidth.py", "benchmark_all_reduce")
    x = torch.ones(2**16)
    with sim.simulated_device(0) as device:
        seconds, algbw, busbw = fixed["benchmark_all_reduce"](x, iters=5)
    assert device.synchronizes >= 3
    assert seconds == pytest.approx(device_seconds(x.numel()), rel=0.05)
    assert algbw == pytest.approx(x.numel() * 4 / seconds / 1e9) and busbw == 0  # p = 1
