"""Waiting for a device, and timing iterations on it.

Collectives on an NPU or a GPU are asynchronous: the call returns once the
work is queued on a stream, long before the data has moved. A host clock read
right after the call measures the queueing, not the transfer. So the benchmark
synchronizes the device before starting and before stopping its clock, and
times single iterations with device events, which the device stamps when it
reaches them. On the CPU, gloo's calls return when the work is done, and the
host clock is the right one.

The npu and cuda paths could not be run where this was written (no device):
they are the documented torch / torch_npu calls (``torch.npu.synchronize``,
``torch.npu.Event(enable_timing=True)``, ``Event.elapsed_time`` in ms), and
tests/runtime/test_bench.py checks with fake modules that the right one is chosen.
"""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

import torch


def device_module(device: torch.device | str) -> ModuleType | None:
    """``torch.npu`` or ``torch.cuda`` for an npu/cuda device, None for the CPU."""
    # a string, not torch.device(...): "npu" is only a device type once torch_npu is imported
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "cpu":
        return None
    if kind == "npu":
        importlib.import_module("torch_npu")  # adds torch.npu
    module = getattr(torch, kind, None)
    if module is None or not hasattr(module, "synchronize"):
        raise ValueError(f"don't know how to wait for a {kind!r} device")
    return module


def synchronize(device: torch.device | str) -> None:
    """Wait until all work queued on ``device`` has finished (a no-op on the CPU)."""
    module = device_module(device)
    if module is not None:
        module.synchronize(device)


class IterationClock:
    """Marks between iterations; :meth:`intervals` gives each iteration's time in seconds.

    On a device it records events on the current stream (no synchronize between
    iterations, so back-to-back calls still overlap as they would in training);
    call :meth:`intervals` after :func:`synchronize`. On the CPU it reads
    ``time.perf_counter``.
    """

    def __init__(self, device: torch.device | str, iterations: int) -> None:
        self.module = device_module(device)
        self.marks: list[Any] = []
        self.events = (
            [self.module.Event(enable_timing=True) for _ in range(iterations + 1)]
            if self.module is not None
            else None
        )

    def mark(self) -> None:
        """Note the time now (host) or queue a timestamp (device)."""
        if self.events is None:
            self.marks.append(time.perf_counter())
        else:
            event = self.events[len(self.marks)]
            event.record()
            self.marks.append(event)

    def intervals(self) -> list[float]:
        """Seconds between consecutive marks."""
        if self.events is None:
            return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]
        # elapsed_time is in milliseconds
        return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:], strict=False)]


def set_device(device: torch.device | str) -> None:
    """Make ``device`` this process's current npu/cuda device (nothing to do on the CPU)."""
    module = device_module(device)
    if module is not None:
        module.set_device(device)
