"""Run a data-parallel version on the ranks: train a few steps, time the steps, measure compute.

Functions here run on every rank (``cluster.run(train, "bucket")``, or under torchrun):

* :func:`train_step` - forward, backward, ``version.finish()``, optimizer step, each traced.
* :func:`train` - a few steps from the shared seed; this rank's last gradients and weights.
* :func:`time_steps` - seconds per step (warm-up, barrier, the slowest rank), plus spans.
* :func:`use_threads` - ``torch.set_num_threads`` so that ranks × threads ≤ cores.
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
    version: str | Version | Callable[[], Version], cfg: Config, bucket_bytes: int
) -> tuple[nn.Module, Version, torch.optim.Optimizer]:
    """The model (wrapped by the version), the version and its optimizer, on this rank."""
    v = _version(version, bucket_bytes)
    inner = make_model(cfg)
    model = v.wrap(inner)
    return model, v, make_optimizer(inner, cfg)


def train(
    version: str | Version | Callable[[], Version],
    steps: int = 3,
    cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
) -> dict[str, Any]:
    """On every rank: ``steps`` steps; the last gradients, final weights and all-reduce calls."""
    cfg = cfg or Config()
    rank, world = dist.get_rank(), dist.get_world_size()
    model, v, opt = setup(version, cfg, bucket_bytes)
    params = list(model.parameters())
    grads: list[torch.Tensor] = []
    for step in range(steps):
        train_step(model, v, opt, local_batch(step, rank, world, cfg))
        grads = [p.grad.detach().clone() for p in params]
    weights = [p.detach().clone() for p in params]
    return {"grads": grads, "weights": weights, "calls": getattr(v, "calls", None)}


def time_steps(
    version: str | Version | Callable[[], Version],
    steps: int = 5,
    warmup: int = 2,
    cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
) -> dict[str, Any]:
    """On every rank: seconds per step (the slowest rank), and this rank's spans of those steps.

    Warm-up steps first (DDP builds its buckets there); before each step a barrier, after it
    the slowest rank's time (``all_reduce`` MAX). On a device, synchronize before reading the
    clock; on the CPU the host clock is the device clock.
    """
    cfg = cfg or Config()
    rank, world = dist.get_rank(), dist.get_world_size()
    model, v, opt = setup(version, cfg, bucket_bytes)
    for step in range(warmup):
        train_step(model, v, opt, local_batch(step, rank, world, cfg))
    seconds = []
    trace.reset()
    for step in range(steps):
        batch = local_batch(warmup + step, rank, world, cfg)
        dist.barrier()
        start = time.perf_counter()
        train_step(model, v, opt, batch)
        elapsed = torch.tensor([time.perf_counter() - start])
        seconds.append(elapsed)
    spans = trace.spans()
    slowest = torch.cat(seconds)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # one collective for all steps, after them
    calls = getattr(v, "calls", 0) / (warmup + steps)
    seconds_list = slowest.tolist()
    return {"seconds": seconds_list, "median": statistics.median(seconds_list),
            "spans": spans, "calls_per_step": calls}  # fmt: skip


def time_compute(steps: int = 5, warmup: int = 2, cfg: Config | None = None) -> dict[str, float]:
    """On every rank: median seconds of forward, backward and optimizer without communication."""
    cfg = cfg or Config()
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(cfg)
    opt = make_optimizer(model, cfg)
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    for step in range(warmup + steps):
        x, y = local_batch(step, rank, world, cfg)
        dist.barrier()
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if step >= warmup:
            for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                parts[name].append(dt)
    medians = torch.tensor([statistics.median(v) for v in parts.values()])
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    return dict(zip(parts, medians.tolist(), strict=True))


def time_all_reduces(sizes: list[int], iters: int = 3) -> float:
    """On every rank: median seconds to all-reduce buffers of these byte sizes back to back."""
    buffers = [torch.ones(max(1, n // 4)) for n in sizes]
    samples = []
    for i in range(iters + 1):
        dist.barrier()
        start = time.perf_counter()
        for b in buffers:
            dist.all_reduce(b)
        elapsed = torch.tensor([time.perf_counter() - start])
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if i:  # the first is a warm-up
            samples.append(elapsed.item())
    return statistics.median(samples)
