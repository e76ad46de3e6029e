"""Run the sharded versions on the ranks (notebook 11): train, count memory and traffic, time.

Functions here run on every rank (``cluster.run(sharding_runs.train, "zero3", cfg)``).
``kind`` names how the model is made data-parallel, from :data:`KINDS`:

* ``ddp`` - :class:`labsupport.ddp.Bucketed`; ``zero1`` - :class:`labsupport.ddp.ZeRO1`
  (an optimizer);
* ``zero2``, ``zero3``, ``zero3 no prefetch`` - :mod:`labsupport.sharding`'s wrappers,
  one unit per block of the model;
* ``torch fsdp2`` - torch's ``fully_shard`` on every block, then on the root, over a CPU
  ``DeviceMesh`` of the default group (torch 2.13 runs it on gloo; not on the emulated
  network, whose process group, written in Python, has no name for DeviceMesh to read).

Or a wrapper class (yours), called as ``kind(model)``. The workload is :class:`Blocks`:
equal blocks (a linear layer, emulated compute, a ReLU), trained with AdamW.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.ddp.versions import Bucketed
from labsupport.ddp.zero import ZeRO1, model_states
from labsupport.runtime import emulator, trace
from labsupport.runtime.bench.timing import time_iterations
from labsupport.runtime.experiments.ddp_runs import train_step
from labsupport.runtime.experiments.workload import Compute, Config
from labsupport.sharding import ZeRO2, ZeRO3


@dataclass(frozen=True)
class Blocks(Config):
    """``layers`` equal blocks of ``hidden`` features, AdamW: each block a unit of ZeRO-3.

    A block is ``Linear(hidden, hidden)``, its emulated compute (``compute_ms`` spread
    over the blocks; backward twice as long) and a ReLU (not after the last block).
    """

    hidden: int = 256
    batch: int = 32
    lr: float = 1e-3
    optimizer_class = torch.optim.AdamW

    def make_model(self, seed: int | None = None) -> nn.Sequential:
        """The blocks, initialised from ``seed`` (default ``self.seed``)."""
        torch.manual_seed(self.seed if seed is None else seed)
        blocks = []
        for i in range(self.layers):
            parts: list[nn.Module] = [nn.Linear(self.hidden, self.hidden)]
            if self.compute_ms > 0:
                parts.append(Compute(self.compute_ms / 1e3 / self.layers))
            if i < self.layers - 1:
                parts.append(nn.ReLU())
            blocks.append(nn.Sequential(*parts))
        return nn.Sequential(*blocks).to(self.dtype)

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets of step ``step``, ``hidden`` features each, the same on every rank."""
        g = torch.Generator().manual_seed(1000 * self.seed + step)
        x = torch.randn(self.batch, self.hidden, generator=g, dtype=self.dtype)
        return x, torch.randn(self.batch, self.hidden, generator=g, dtype=self.dtype)

    def optimizer_defaults(self) -> dict[str, Any]:
        """AdamW with the learning rate ``lr`` (its other defaults: torch's)."""
        return {"lr": self.lr}


def torch_fsdp2(model: nn.Module) -> nn.Module:
    """torch's FSDP2: ``fully_shard`` on each block, then on the root (a CPU DeviceMesh)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # torch's FSDP2 does not broadcast: every rank must start from rank 0's weights.
    with torch.no_grad():
        for t in model.parameters():
            dist.broadcast(t, 0)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in model:
        fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


#: The versions by name (``zero1`` is an optimizer: see :func:`setup`).
KINDS: dict[str, Callable[..., Any]] = {
    "ddp": functools.partial(Bucketed, bucket_cap_mb=0.25),
    "zero1": ZeRO1,
    "zero2": ZeRO2,
    "zero3": ZeRO3,
    "zero3 no prefetch": functools.partial(ZeRO3, prefetch=False),
    "torch fsdp2": torch_fsdp2,
}


def setup(kind: Any, cfg: Blocks) -> tuple[nn.Module, torch.optim.Optimizer]:
    """(the module to call, its optimizer); each rank's model from a seed of its own."""
    model = cfg.make_model(seed=cfg.seed + dist.get_rank())
    if kind == "zero1":
        return model, cfg.make_optimizer(model, sharded_by=ZeRO1)
    wrapped = (KINDS[kind] if isinstance(kind, str) else kind)(model)
    return wrapped, cfg.make_optimizer(wrapped)


def full_weights(model: nn.Module) -> list[torch.Tensor]:
    """Every weight, whole, in the model's order, on every rank (gathers what is sharded)."""
    if isinstance(model, ZeRO3):
        out = []
        for unit in model.units:
            unit.gather(async_op=False)
            out += [v.detach().clone() for v in unit.views]
            unit.free()
        return out
    inner = getattr(model, "module", model)
    return [
        t.full_tensor() if hasattr(t, "full_tensor") else t.detach().clone()
        for t in inner.parameters()
    ]


def _batch(cfg: Blocks, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    return cfg.local_batch(step, dist.get_rank(), dist.get_world_size())


def train(kind: Any, cfg: Blocks, steps: int = 3) -> dict[str, Any]:
    """On every rank: losses of the global batch (mean over ranks), weights after each step."""
    model, opt = setup(kind, cfg)
    losses, weights = [], []
    for s in range(steps):
        losses.append(train_step(model, opt, _batch(cfg, s), cfg.loss))
        weights.append(full_weights(model))
    mean = torch.stack(losses).double()
    dist.all_reduce(mean)
    return {"losses": (mean / dist.get_world_size()).tolist(), "weights": weights}


def baseline(cfg: Blocks, steps: int = 3) -> dict[str, Any]:
    """One process, the whole batch, rank 0's initial weights: losses, weights after each step."""
    model = cfg.make_model()
    opt = cfg.make_optimizer(model)
    losses, weights = [], []
    for s in range(steps):
        losses.append(train_step(model, opt, cfg.global_batch(s), cfg.loss).item())
        weights.append([t.detach().clone() for t in model.parameters()])
    return {"losses": losses, "weights": weights}


def largest_gaps(run: dict[str, Any], reference: dict[str, Any]) -> tuple[float, float]:
    """(largest relative loss difference, largest absolute weight difference) over all steps."""
    loss = max(abs(a - b) / abs(b) for a, b in zip(run["losses"], reference["losses"], strict=True))
    weight = max(
        (a - b).abs().max().item()
        for mine, theirs in zip(run["weights"], reference["weights"], strict=True)
        for a, b in zip(mine, theirs, strict=True)
    )
    return loss, weight


def memory_and_traffic(kind: Any, cfg: Blocks) -> dict[str, Any]:
    """On every rank of a netem group: model states held after a step, and bytes sent per step.

    One step first (the construction's broadcast and any first all-gather before it), then
    one more step, counted: :func:`labsupport.runtime.emulator.traffic` before and after.
    The model states are counted after that step's ``optimizer.step()``, before
    ``zero_grad``: the gradients are still there (:func:`labsupport.ddp.model_states`,
    each storage once; a ZeRO-3 unit's freed buffer holds no memory).
    """
    model, opt = setup(kind, cfg)
    train_step(model, opt, _batch(cfg, 0), cfg.loss)
    before = emulator.traffic()["bytes_sent"]
    x, y = _batch(cfg, 1)
    opt.zero_grad(set_to_none=True)
    cfg.loss(model(x), y).backward()
    opt.step()
    sent = emulator.traffic()["bytes_sent"] - before
    return {"memory": model_states(model, opt), "bytes": sent}


def _trace_units(model: nn.Module) -> None:
    """Record each block's forward and backward as spans of lane ``units`` (hooks)."""
    inner = getattr(model, "module", model)
    opened: dict[tuple[int, str], int] = {}

    def begin(k: int, what: str) -> None:
        opened[k, what] = trace.now_ns()

    def end(k: int, what: str) -> None:
        trace.default().add(f"unit {what}", opened.pop((k, what)), trace.now_ns(), "units")

    def before(k: int, x: torch.Tensor) -> tuple[torch.Tensor]:
        begin(k, "forward")  # after the wrapper's own pre-hook: the parameters are here
        if not x.requires_grad:
            x.requires_grad_()  # so that the first block's backward has an end to mark
        # The gradient of the block's input is its backward's end: on a view of its own, so
        # that the end is marked before the wrapper's hook on the input waits for a gather.
        x = x.view_as(x)
        x.register_hook(lambda _g: end(k, "backward"))
        return (x,)

    def after(k: int, out: torch.Tensor) -> None:
        end(k, "forward")
        out.register_hook(lambda _g: begin(k, "backward"))  # after the wrapper's hook

    for k, block in enumerate(inner):
        block.register_forward_pre_hook(lambda _m, args, k=k: before(k, args[0]))  # type: ignore
        block.register_forward_hook(lambda _m, _a, out, k=k: after(k, out))


def time_steps(kind: Any, cfg: Blocks, steps: int = 3, warmup: int = 1) -> dict[str, Any]:
    """On every rank: seconds per step (the slowest rank's median) and this rank's spans.

    Besides forward, backward and optimizer (lane ``compute``) and every collective (lane
    ``comm``), each block's forward and backward is a span of lane ``units``: it starts
    once the wrapper has its parameters.
    """
    model, opt = setup(kind, cfg)
    _trace_units(model)
    batches = {i: _batch(cfg, i) for i in range(warmup + steps)}

    def before(i: int) -> None:
        if i == warmup:
            trace.reset()

    def step(i: int) -> None:
        train_step(model, opt, batches[i], cfg.loss)
        done[0] = trace.now_ns()

    done = [0]
    with trace.collectives():
        timing = time_iterations(step, steps, warmup=warmup, before=before)
    spans = [s for s in trace.spans() if s.start_ns <= done[0]]
    return {"median": timing.median, "spans": spans}


def time_compute(cfg: Blocks, steps: int = 3) -> dict[str, float]:
    """On every rank: median seconds of one block's forward and backward, without communication."""
    model = cfg.make_model()
    opt = cfg.make_optimizer(model)

    def step(i: int) -> None:
        with trace.span("forward"):
            loss = cfg.loss(model(batches[i][0]), batches[i][1])
        with trace.span("backward"):
            loss.backward()
        opt.step()
        opt.zero_grad()

    batches = {i: _batch(cfg, i) for i in range(1 + steps)}
    trace.reset()
    time_iterations(step, steps, warmup=1)
    spans = trace.spans()[2:]  # not the warm-up's
    per = {
        n: [s.duration_ns / 1e9 / cfg.layers for s in spans if s.name == n]
        for n in ("forward", "backward")
    }
    return {n: sorted(v)[len(v) // 2] for n, v in per.items()}
