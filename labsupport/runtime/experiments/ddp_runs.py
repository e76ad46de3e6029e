"""Run a data-parallel version on the ranks: train, time the steps, count the traffic.

Functions here run on every rank (``cluster.run(ddp_runs.train, "bucket", cfg)``, or under
torchrun). ``parallel`` says how the model is made data-parallel:

* a name from :data:`VERSIONS` (``naive``, ``flat``, ``overlap``, ``bucket``, ``torch``,
  ``zero1``);
* an ``nn.Module`` wrapper class (yours, say), or a ``functools.partial`` of one:
  ``parallel(model)`` wraps the model, the workload's optimizer steps it;
* a ``torch.optim.Optimizer`` class with ``ZeroRedundancyOptimizer``'s constructor
  (ZeRO-1, yours or :class:`~labsupport.ddp.zero.ZeRO1`): the model stays plain and
  the optimizer is built as ``parallel(param_groups, optimizer_class, **defaults)``;
* a pair ``(wrapper, sharded optimizer)``: both (ZeRO-1 under a DDP wrapper).

``cfg`` is a workload (:class:`~labsupport.runtime.experiments.workload.Config`, or the capstone's
``GPTConfig``). Each rank builds its model from a seed of its own (``cfg.seed +
rank``), as a program that does not seed its ranks alike would: the version must
make them start from rank 0's weights, as torch's DDP does.

Everything runs on the rank's device (:func:`labsupport.runtime.backend.rank_device`: the NPU
or GPU ``LOCAL_RANK`` under hccl or nccl, else the CPU; the NPU and GPU paths were not
run on real hardware). Timed loops go through :mod:`labsupport.runtime.bench.timing` (warm-up,
synchronize, barrier, the slowest rank). Trace spans read the host clock without
synchronizing, so on a device they show when work was *queued*.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.ddp import base as ddp_base
from labsupport.ddp.versions import Bucketed, Flat, Naive, Overlapped, TorchDDP
from labsupport.ddp.zero import ZeRO1, model_states
from labsupport.runtime import emulator, trace
from labsupport.runtime.backend import rank_device
from labsupport.runtime.bench.timing import device_clock, slowest, time_iterations
from labsupport.runtime.experiments.workload import Config, Workload

#: The versions by name. ``bucket`` and ``torch`` take ``bucket_cap_mb``.
VERSIONS: dict[str, type] = {
    "naive": Naive,
    "flat": Flat,
    "overlap": Overlapped,
    "bucket": Bucketed,
    "torch": TorchDDP,
    "zero1": ZeRO1,
}
Parallel = str | Callable[..., Any]

# The DDP versions' wait at the end of backward, on the timelines these runs record.
ddp_base.span = trace.span


def use_threads(ranks_on_host: int | None = None) -> int:
    """Set this rank's torch threads to cores // ranks (at least 1); returns it.

    More threads than cores per rank makes ranks fight for cores (a step can be
    30x slower). ``ranks_on_host``: default the world size. On an emulated network
    (:mod:`labsupport.netem`) it is always 1: the emulated clock charges the CPU
    time of the thread that runs your code, so a matrix product's work must all be
    in that thread (a second intra-op thread's work would cost nothing).
    """
    if emulator.clock.installed():
        torch.set_num_threads(1)
        return 1
    ranks = ranks_on_host or (dist.get_world_size() if dist.is_initialized() else 1)
    threads = max(1, (os.cpu_count() or 1) // ranks)
    torch.set_num_threads(threads)
    return threads


def version_factory(parallel: Parallel, bucket_cap_mb: float | None) -> Any:
    """The wrapper (or tuple of wrappers) a version name stands for, with its bucket cap."""
    if isinstance(parallel, tuple):
        return tuple(version_factory(p, bucket_cap_mb) for p in parallel)
    if not isinstance(parallel, str):
        return parallel
    if parallel not in VERSIONS:
        raise ValueError(f"unknown version {parallel!r}; choose one of: {', '.join(VERSIONS)}")
    if parallel in ("bucket", "torch"):
        return functools.partial(VERSIONS[parallel], bucket_cap_mb=bucket_cap_mb)
    return VERSIONS[parallel]


def is_sharded_optimizer(factory: Any) -> bool:
    """True for an optimizer class (or a partial of one, or a pair ending in one): ZeRO-1."""
    if isinstance(factory, tuple):
        return is_sharded_optimizer(factory[-1])
    while isinstance(factory, functools.partial):
        factory = factory.func
    return isinstance(factory, type) and issubclass(factory, torch.optim.Optimizer)


def setup(
    parallel: Parallel,
    cfg: Workload,
    *,
    bucket_cap_mb: float | None = None,
    device: torch.device | None = None,
) -> tuple[nn.Module, nn.Module, torch.optim.Optimizer]:
    """(the module to call, the model inside it, the optimizer), on ``device`` (the rank's)."""
    factory = version_factory(parallel, bucket_cap_mb)
    inner = cfg.make_model(seed=cfg.seed + dist.get_rank()).to(device or rank_device())
    if isinstance(factory, tuple):  # a wrapper, then a sharded optimizer
        wrapper, sharded = factory
        model = wrapper(inner)
        return model, inner, cfg.make_optimizer(inner, sharded_by=sharded)
    if is_sharded_optimizer(factory):
        return inner, inner, cfg.make_optimizer(inner, sharded_by=factory)
    return factory(inner), inner, cfg.make_optimizer(inner)


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: tuple, loss_fn: Callable
) -> torch.Tensor:
    """One step, as with torch's DDP: backward returns with the gradients averaged."""
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with trace.span("forward"):
        loss = loss_fn(model(x), y)
    with trace.span("backward"):
        loss.backward()  # a DDP wrapper has averaged every gradient when this returns
    with trace.span("optimizer"):
        # The course's ZeRO-1 (the paper's): reduce-scatter, step the shard, all-gather, one
        # all-reduce's bytes. (torch's ZeroRedundancyOptimizer, same constructor, instead
        # broadcasts every updated parameter after DDP's all-reduce: about 1.5x the bytes.)
        optimizer.step()
    return loss.detach()


def _batch(cfg: Workload, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = cfg.local_batch(step, dist.get_rank(), dist.get_world_size())
    return x.to(device), y.to(device)


def train(
    parallel: Parallel,
    cfg: Workload | None = None,
    steps: int = 3,
    *,
    bucket_cap_mb: float | None = None,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """On every rank: ``steps`` steps; losses of the global batch, last grads, weights, memory.

    The global batch's loss is the mean of the ranks' losses (equal shares), all-reduced
    once after training. ``grads`` are this rank's ``.grad`` after the last step (the
    mean for a DDP wrapper, the local gradient under ZeRO-1), on the CPU.
    """
    cfg, device = cfg or Config(), device or rank_device()
    model, inner, opt = setup(parallel, cfg, bucket_cap_mb=bucket_cap_mb, device=device)
    losses = [train_step(model, opt, _batch(cfg, s, device), cfg.loss) for s in range(steps)]
    mean = torch.stack(losses).double()
    dist.all_reduce(mean)
    params = list(inner.parameters())
    return {
        "losses": (mean / dist.get_world_size()).cpu().tolist(),
        "grads": [None if p.grad is None else p.grad.detach().cpu().clone() for p in params],
        "weights": [p.detach().cpu().clone() for p in params],
        "memory": model_states(inner, opt),
    }


def time_steps(
    parallel: Parallel,
    cfg: Workload | None = None,
    steps: int = 5,
    warmup: int = 2,
    *,
    bucket_cap_mb: float | None = None,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """On every rank: seconds per step (the slowest rank's), and this rank's spans of those steps.

    ``bench.timing.time_iterations``: ``warmup`` untimed steps (torch's DDP builds its
    buckets there), then before each step synchronize, barrier, synchronize, after it
    synchronize, and the slowest rank's time of each step. Every collective the version
    calls through ``torch.distributed`` is traced (:func:`labsupport.runtime.trace.collectives`).
    """
    cfg, device = cfg or Config(), device or rank_device()
    model, _, opt = setup(parallel, cfg, bucket_cap_mb=bucket_cap_mb, device=device)
    batches: dict[int, tuple] = {}

    def before(i: int) -> None:
        if i == warmup:  # keep the timed steps' spans and calls only
            trace.reset()
            calls.clear()
        batches[i] = _batch(cfg, i, device)

    def step(i: int) -> None:
        train_step(model, opt, batches.pop(i), cfg.loss)
        counted[0] = len(calls)  # the version's collectives, not the timing's own
        done[0] = trace.now_ns()

    counted, done = [0], [0]
    with trace.collectives() as calls:
        for i in range(warmup):
            batches[i] = _batch(cfg, i, device)
        timing = time_iterations(step, steps, warmup=warmup, device=device, before=before)
    spans = [s for s in trace.spans() if s.start_ns <= done[0]]  # not the timing's all-reduce
    return {
        "seconds": timing.seconds,
        "median": timing.median,
        "spans": spans,
        "calls_per_step": counted[0] / steps,
    }


def time_compute(
    cfg: Workload | None = None, steps: int = 5, warmup: int = 2, device: torch.device | None = None
) -> dict[str, float]:
    """On every rank: median seconds of forward, backward and optimizer without communication."""
    cfg, device = cfg or Config(), device or rank_device()
    model = cfg.make_model().to(device)
    opt = cfg.make_optimizer(model)
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}

    def step(i: int) -> None:
        x, y = _batch(cfg, i, device)
        opt.zero_grad(set_to_none=True)
        t0 = device_clock(device)
        loss = cfg.loss(model(x), y)
        t1 = device_clock(device)
        loss.backward()
        t2 = device_clock(device)
        opt.step()
        t3 = device_clock(device)
        if i >= warmup:
            for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                parts[name].append(dt)

    time_iterations(step, steps, warmup=warmup, device=device)
    medians = slowest([statistics.median(v) for v in parts.values()], device)
    return dict(zip(parts, medians, strict=True))


def time_all_reduces(sizes: list[int], iters: int = 3, device: torch.device | None = None) -> float:
    """On every rank: median seconds to all-reduce buffers of these byte sizes back to back."""
    device = device or rank_device()
    buffers = [torch.ones(max(1, n // 4), device=device) for n in sizes]

    def step(_: int) -> None:
        for b in buffers:
            dist.all_reduce(b)

    return time_iterations(step, iters, warmup=1, device=device).median


def traffic_per_step(
    parallel: Parallel,
    cfg: Workload | None = None,
    steps: int = 2,
    *,
    bucket_cap_mb: float | None = None,
) -> float | None:
    """On every rank of a netem group: bytes this rank sent per training step (None elsewhere).

    One untimed step first (and the construction's broadcast before it); then ``steps``
    steps with nothing else on the network, and the difference of
    :func:`labsupport.runtime.emulator.traffic` divided by ``steps``.
    """
    if emulator.current_network() is None:
        return None
    cfg, device = cfg or Config(), rank_device()
    model, _, opt = setup(parallel, cfg, bucket_cap_mb=bucket_cap_mb, device=device)
    train_step(model, opt, _batch(cfg, 0, device), cfg.loss)
    before = emulator.traffic()["bytes_sent"]
    for step in range(steps):
        train_step(model, opt, _batch(cfg, 1 + step, device), cfg.loss)
    return (emulator.traffic()["bytes_sent"] - before) / steps
