"""Run a data-parallel version on the ranks: train a few steps, time the steps, measure compute.

Functions here run on every rank (``cluster.run(train, "bucket")``, or under torchrun):

* :func:`train_step` - forward, backward, ``version.finish()``, optimizer step, each traced.
* :func:`train` - a few steps from the shared seed; this rank's last gradients and weights.
* :func:`time_steps` - seconds per step (warm-up, barrier, the slowest rank), plus spans.
* :func:`use_threads` - ``torch.set_num_threads`` so that ranks × threads ≤ cores.

Everything runs on the rank's device (:func:`labsupport.backend.rank_device`: the
NPU or GPU ``LOCAL_RANK`` under hccl or nccl, else the CPU): the model, the batches,
the buffers the timings all-reduce. Device work is asynchronous, so every clock
reading comes after a device synchronize (:func:`device_clock`), after a barrier
that lines the ranks up, after warm-up steps; a step's time is the slowest rank's.
The NPU and GPU paths were not run on real hardware (none where this was written):
they use the documented calls, and tests/test_ddp.py checks with fakes that the
right device and synchronize are chosen. Trace spans read the host clock without
synchronizing, so on a device they show when work was *queued*.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport import trace
from labsupport.backend import rank_device
from labsupport.bench.device import synchronize
from labsupport.ddp.model import Config, local_batch, loss_fn, make_model, make_optimizer
from labsupport.ddp.versions import Version, make_version


def use_threads(ranks_on_host: int | None = None) -> int:
    """Set this rank's torch threads to cores // ranks (at least 1); returns it.

    More threads than cores per rank makes ranks fight for cores (a step can be
    30× slower). ``ranks_on_host``: default the world size.
    """
    ranks = ranks_on_host or (dist.get_world_size() if dist.is_initialized() else 1)
    threads = max(1, (os.cpu_count() or 1) // ranks)
    torch.set_num_threads(threads)
    return threads


def device_clock(device: torch.device) -> float:
    """``time.perf_counter()`` once the work queued on ``device`` is done.

    Synchronizes an npu or cuda device first (``torch.npu.synchronize`` or
    ``torch.cuda.synchronize``); on the CPU the host clock is the device clock.
    """
    synchronize(device)
    return time.perf_counter()


def _lined_up(device: torch.device) -> float:
    """Synchronize, barrier, synchronize, read the clock: every rank starts together."""
    synchronize(device)
    dist.barrier()
    return device_clock(device)


def _batch(step: int, cfg: Config, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = local_batch(step, dist.get_rank(), dist.get_world_size(), cfg)
    return x.to(device), y.to(device)


def _version(version: str | Version | Callable[[], Version], bucket_bytes: int) -> Version:
    if isinstance(version, str):
        return make_version(version, bucket_bytes)
    return version() if callable(version) and not isinstance(version, Version) else version


def train_step(
    model: nn.Module, version: Version, opt: torch.optim.Optimizer, batch: tuple
) -> torch.Tensor:
    """One step: forward, backward, wait for the gradients (``finish``), optimizer step."""
    x, y = batch
    opt.zero_grad(set_to_none=True)
    with trace.span("forward"):
        loss = loss_fn(model(x), y)
    with trace.span("backward"):
        loss.backward()
    with trace.span("wait"):
        version.finish()  # every gradient averaged: only now may the optimizer use them
    with trace.span("optimizer"):
        opt.step()
    return loss.detach()


def setup(
    version: str | Version | Callable[[], Version], cfg: Config, bucket_bytes: int,
    device: torch.device | None = None,
) -> tuple[nn.Module, Version, torch.optim.Optimizer]:  # fmt: skip
    """The model on ``device`` (default: the rank's), wrapped by the version; the optimizer."""
    v = _version(version, bucket_bytes)
    inner = make_model(cfg).to(device or rank_device())
    model = v.wrap(inner)
    return model, v, make_optimizer(inner, cfg)


def train(
    version: str | Version | Callable[[], Version],
    steps: int = 3,
    cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """On every rank: ``steps`` steps; the last gradients, final weights (on the CPU), calls."""
    cfg, device = cfg or Config(), device or rank_device()
    model, v, opt = setup(version, cfg, bucket_bytes, device)
    params = list(model.parameters())
    grads: list[torch.Tensor] = []
    for step in range(steps):
        train_step(model, v, opt, _batch(step, cfg, device))
        grads = [p.grad.detach().cpu().clone() for p in params]
    weights = [p.detach().cpu().clone() for p in params]
    return {"grads": grads, "weights": weights, "calls": getattr(v, "calls", None)}


def time_steps(
    version: str | Version | Callable[[], Version],
    steps: int = 5,
    warmup: int = 2,
    cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """On every rank: seconds per step (the slowest rank), and this rank's spans of those steps.

    Warm-up steps first (DDP builds its buckets there); before each step synchronize,
    barrier, synchronize; after it synchronize, then the clock; at the end the slowest
    rank's time of each step (one ``all_reduce`` MAX).
    """
    cfg, device = cfg or Config(), device or rank_device()
    model, v, opt = setup(version, cfg, bucket_bytes, device)
    for step in range(warmup):
        train_step(model, v, opt, _batch(step, cfg, device))
    seconds = []
    trace.reset()
    for step in range(steps):
        batch = _batch(warmup + step, cfg, device)
        start = _lined_up(device)
        train_step(model, v, opt, batch)
        seconds.append(device_clock(device) - start)
    spans = trace.spans()
    slowest = torch.tensor(seconds, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # one collective for all steps, after them
    calls = getattr(v, "calls", 0) / (warmup + steps)
    seconds_list = slowest.tolist()
    return {"seconds": seconds_list, "median": statistics.median(seconds_list),
            "spans": spans, "calls_per_step": calls}  # fmt: skip


def time_compute(
    steps: int = 5, warmup: int = 2, cfg: Config | None = None, device: torch.device | None = None
) -> dict[str, float]:
    """On every rank: median seconds of forward, backward and optimizer without communication."""
    cfg, device = cfg or Config(), device or rank_device()
    model = make_model(cfg).to(device)
    opt = make_optimizer(model, cfg)
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    for step in range(warmup + steps):
        x, y = _batch(step, cfg, device)
        opt.zero_grad(set_to_none=True)
        t0 = _lined_up(device)
        loss = loss_fn(model(x), y)
        t1 = device_clock(device)
        loss.backward()
        t2 = device_clock(device)
        opt.step()
        t3 = device_clock(device)
        if step >= warmup:
            for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                parts[name].append(dt)
    medians = torch.tensor([statistics.median(v) for v in parts.values()], device=device)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    return dict(zip(parts, medians.tolist(), strict=True))


def time_all_reduces(sizes: list[int], iters: int = 3, device: torch.device | None = None) -> float:
    """On every rank: median seconds to all-reduce buffers of these byte sizes back to back."""
    device = device or rank_device()
    buffers = [torch.ones(max(1, n // 4), device=device) for n in sizes]
    samples = []
    for i in range(iters + 1):
        start = _lined_up(device)
        for b in buffers:
            dist.all_reduce(b)
        elapsed = torch.tensor([device_clock(device) - start], device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if i:  # the first is a warm-up
            samples.append(elapsed.item())
    return statistics.median(samples)
