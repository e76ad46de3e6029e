"""Run a strategy on the ranks: train, time the steps, count the traffic, trace the collectives.

Functions here run on every rank (``cluster.run(train, "ddp")``, or under torchrun):

* :func:`setup` - this rank's model (its own seed, on :func:`~labsupport.backend.rank_device`),
  wrapped by the strategy, and the optimizers the strategy built.
* :func:`train_step` - forward, backward, ``finish()``, ``step()``, each a span in the trace.
* :func:`train` - ``steps`` steps; the loss of the global batch at each step, the final
  weights, the model states' bytes (:func:`~labsupport.capstone.strategies.model_states`).
* :func:`time_steps` - seconds per step (warm-up, barrier, synchronize, the slowest rank),
  and this rank's spans, with every collective the strategy called (:func:`traced_collectives`).
* :func:`traffic_per_step` - bytes this rank sent per step on the emulated network.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport import netem, trace
from labsupport.backend import rank_device
from labsupport.bench.device import synchronize
from labsupport.capstone.model import (
    Config,
    local_batch,
    loss_fn,
    make_model,
    make_optimizer,
)
from labsupport.capstone.strategies import make_strategy, model_states

#: The collectives :func:`traced_collectives` records (the ones the strategies use).
TRACED = ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "broadcast")


def _strategy(strategy: Any, bucket_bytes: int) -> Any:
    if isinstance(strategy, str):
        return make_strategy(strategy, bucket_bytes)
    return strategy() if isinstance(strategy, type) or callable(strategy) else strategy


def setup(
    strategy: Any, cfg: Config, bucket_bytes: int = 1 << 20
) -> tuple[nn.Module, nn.Module, Any, list[torch.optim.Optimizer]]:
    """(the module to call, the model inside it, the strategy, the optimizers it built).

    ``strategy``: a name (``ddp``, ``zero1``, ``torch``), a class or a function that
    returns one. Each rank builds the model from its own seed (``cfg.seed + rank``): the
    strategy's ``wrap`` must make them all start from rank 0's weights.
    """
    rank = dist.get_rank()
    s = _strategy(strategy, bucket_bytes)
    inner = make_model(cfg, seed=cfg.seed + rank).to(rank_device())
    optimizers: list[torch.optim.Optimizer] = []

    def build(params: Any) -> torch.optim.Optimizer:
        opt = make_optimizer(params, cfg)
        optimizers.append(opt)
        return opt

    return s.wrap(inner, build), inner, s, optimizers


def train_step(model: nn.Module, strategy: Any, batch: tuple) -> torch.Tensor:
    """One step on this rank's batch: forward, backward, ``finish()``, ``step()``; the loss."""
    x, y = batch
    for p in model.parameters():
        p.grad = None
    with trace.span("forward"):
        loss = loss_fn(model(x), y)
    with trace.span("backward"):
        loss.backward()
    with trace.span("wait"):
        strategy.finish()  # every gradient reduced: only now may the optimizer use them
    with trace.span("optimizer"):
        strategy.step()
    return loss.detach()


def _batch(step: int, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = local_batch(step, dist.get_rank(), dist.get_world_size(), cfg)
    device = rank_device()
    return x.to(device), y.to(device)


def train(
    strategy: Any, steps: int = 5, cfg: Config | None = None, bucket_bytes: int = 1 << 20
) -> dict[str, Any]:
    """On every rank: ``steps`` steps; the global batch's loss per step, final weights, bytes.

    The loss of the global batch is the mean of the ranks' losses (equal shares): one
    all-reduce of all steps' losses after training, so it adds nothing to the steps.
    """
    cfg = cfg or Config()
    model, inner, s, optimizers = setup(strategy, cfg, bucket_bytes)
    losses = torch.stack([train_step(model, s, _batch(step, cfg)) for step in range(steps)])
    memory = model_states(inner, optimizers)
    dist.all_reduce(losses)
    losses /= dist.get_world_size()
    weights = [p.detach().cpu().clone() for p in inner.parameters()]
    return {"losses": losses.cpu().tolist(), "weights": weights, "memory": memory}


def _called_by_trace() -> bool:
    return sys._getframe(2).f_code is trace.Recorder.comm.__code__


@contextlib.contextmanager
def traced_collectives() -> Iterator[None]:
    """Within the block, every collective in :data:`TRACED` is recorded by ``trace.comm``.

    Your strategy calls ``dist.all_reduce(...)``; for the block's duration that name is a
    wrapper that calls the real one through :func:`labsupport.trace.comm`, so the call
    shows on the timeline from issue to completion without changing your code.
    """
    originals = {name: getattr(dist, name) for name in TRACED}

    def traced(name: str, fn: Callable) -> Callable:
        def wrapper(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if _called_by_trace():  # already recorded by the caller's trace.comm
                return fn(tensor, *args, **kwargs)
            info = f"{tensor.numel() * tensor.element_size() / 1e3:.0f} kB"
            return trace.comm(fn, tensor, *args, name=name, info=info, **kwargs)

        return wrapper

    for name, fn in originals.items():
        setattr(dist, name, traced(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def time_steps(
    strategy: Any, steps: int = 5, warmup: int = 2, cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
) -> dict[str, Any]:  # fmt: skip
    """On every rank: seconds per step (the slowest rank), the median, and this rank's spans.

    Warm-up steps first (torch's DDP builds its buckets there); before each step a
    barrier, around it a device synchronize, after all steps the slowest rank's time of
    each (``all_reduce`` MAX). Collectives are traced (:func:`traced_collectives`).
    """
    cfg = cfg or Config()
    device = rank_device()
    model, _, s, _ = setup(strategy, cfg, bucket_bytes)
    with traced_collectives():
        for step in range(warmup):
            train_step(model, s, _batch(step, cfg))
        seconds = []
        trace.reset()
        for step in range(steps):
            batch = _batch(warmup + step, cfg)
            synchronize(device)
            dist.barrier()
            start = time.perf_counter()
            train_step(model, s, batch)
            synchronize(device)
            seconds.append(time.perf_counter() - start)
        spans = trace.spans()
    slowest = torch.tensor(seconds, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # one collective for all steps, after them
    seconds = slowest.cpu().tolist()
    return {"seconds": seconds, "median": statistics.median(seconds), "spans": spans}


def traffic_per_step(
    strategy: Any, steps: int = 2, cfg: Config | None = None, bucket_bytes: int = 1 << 20
) -> float | None:
    """On every rank of a netem group: bytes this rank sent per training step (None elsewhere).

    One untimed step first; then ``steps`` steps with nothing else on the network, and
    the difference of :func:`labsupport.netem.traffic` divided by ``steps``.
    """
    if netem.current_network() is None:
        return None
    cfg = cfg or Config()
    model, _, s, _ = setup(strategy, cfg, bucket_bytes)
    train_step(model, s, _batch(0, cfg))
    before = netem.traffic()["bytes_sent"]
    for step in range(steps):
        train_step(model, s, _batch(1 + step, cfg))
    return (netem.traffic()["bytes_sent"] - before) / steps
