"""A workload for data-parallel training: model, data, optimizer, and the one-process baseline.

A **workload** is a config object with the methods below; :class:`Config` (a small
MLP, notebook 07) and :class:`labsupport.runtime.capstone.GPTConfig` (a tiny transformer,
notebook 10) are the two the course uses, and every function of
:mod:`labsupport.runtime.experiments.ddp_runs` takes either:

* ``make_model(seed=None)`` - the model on the CPU, from ``seed`` (default ``cfg.seed``);
* ``global_batch(step)`` - inputs and targets of a step, the same on every rank;
* ``local_batch(step, rank, world_size)`` - rank ``r``'s rows ``r*b/p .. (r+1)*b/p`` of it;
* ``loss(out, y)`` - a **mean** over the rows given, so that the mean of the ranks'
  gradients is exactly the gradient of the whole batch (up to float rounding);
* ``param_groups(model)`` and ``make_optimizer(model, sharded_by=None)`` - the optimizer;
  ``sharded_by`` is a class with ``ZeroRedundancyOptimizer``'s constructor (ZeRO-1);
* ``baseline(steps)`` - one process, rank 0's initial weights, the whole global batch.

With ``compute_ms > 0`` each layer also stands for an accelerator's time:
:func:`emulate_compute` (``emulator.compute``) in its forward, twice as long in its
backward (the gradients do not change). On an accelerator the host CPU is free while the device
computes; on a 2-core laptop four ranks' real matrix products would leave no core
for the network's work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from labsupport.runtime.emulator.clock import compute


def emulate_compute(seconds: float) -> None:
    """Stand for ``seconds`` of accelerator compute: :func:`labsupport.runtime.emulator.compute`.

    On an emulated network the rank's clock moves by exactly ``seconds`` and nothing
    runs; elsewhere (a real run, a plain process) the thread sleeps that long.
    """
    compute(seconds)


class _Compute(torch.autograd.Function):
    """Identity that takes ``seconds`` forward and twice that backward (emulated compute)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, seconds: float) -> torch.Tensor:  # noqa: ANN001
        ctx.seconds = seconds
        emulate_compute(seconds)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        emulate_compute(2 * ctx.seconds)
        return grad, None


class Compute(nn.Module):
    """A layer's emulated accelerator time; computes nothing (see the module docstring)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _Compute.apply(x, self.seconds)


class Workload:
    """What every workload shares; a subclass gives the model, data, loss and optimizer."""

    batch: int
    seed: int
    dtype: torch.dtype
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.SGD

    def make_model(self, seed: int | None = None) -> nn.Module:  # noqa: D102
        raise NotImplementedError

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: D102
        raise NotImplementedError

    def loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # noqa: D102
        raise NotImplementedError

    def optimizer_defaults(self) -> dict[str, Any]:
        """Keyword arguments of :attr:`optimizer_class` (the learning rate, ...)."""
        return {}

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        """The optimizer's parameter groups: one group of every parameter."""
        return [{"params": list(model.parameters())}]

    def make_optimizer(self, model: nn.Module, sharded_by: Callable | None = None) -> Any:
        """The optimizer over :meth:`param_groups`, or ``sharded_by(groups, cls, **defaults)``."""
        groups, defaults = self.param_groups(model), self.optimizer_defaults()
        if sharded_by is not None:
            return sharded_by(groups, self.optimizer_class, **defaults)
        return self.optimizer_class(groups, **defaults)

    def local_batch(
        self, step: int, rank: int, world_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's share of :meth:`global_batch` (the batch must divide evenly)."""
        if self.batch % world_size:
            raise ValueError(
                f"the global batch {self.batch} does not split evenly over {world_size} ranks: "
                f"use a batch that is a multiple of {world_size}"
            )
        x, y = self.global_batch(step)
        n = self.batch // world_size
        return x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]

    def baseline(self, steps: int) -> dict[str, list]:
        """One process, rank 0's weights, the whole batch: losses, last gradients, final weights."""
        model = self.make_model()
        opt = self.make_optimizer(model)
        losses, grads = [], []
        for step in range(steps):
            x, y = self.global_batch(step)
            opt.zero_grad(set_to_none=True)
            loss = self.loss(model(x), y)
            loss.backward()
            grads = [
                None if p.grad is None else p.grad.detach().clone() for p in model.parameters()
            ]
            opt.step()
            losses.append(loss.item())
        weights = [p.detach().clone() for p in model.parameters()]
        return {"losses": losses, "grads": grads, "weights": weights}

    def param_count(self) -> int:
        """Number of parameters."""
        return sum(p.numel() for p in self.make_model().parameters())

    def param_bytes(self) -> int:
        """Bytes of all parameters."""
        return sum(p.numel() * p.element_size() for p in self.make_model().parameters())


@dataclass(frozen=True)
class Config(Workload):
    """The MLP of notebook 07 and its data: by default 4 layers, 3.7 MB of float32 weights."""

    in_features: int = 256
    hidden: int = 512
    layers: int = 4
    out_features: int = 16
    batch: int = 64  # the global batch, split evenly over the ranks
    lr: float = 0.05
    seed: int = 0
    compute_ms: float = 0.0  # > 0: forward emulates this long in all, backward twice as long
    dtype: torch.dtype = torch.float32

    def make_model(self, seed: int | None = None) -> nn.Sequential:
        """The MLP, initialised from ``seed`` (default ``self.seed``)."""
        torch.manual_seed(self.seed if seed is None else seed)
        widths = [self.in_features] + [self.hidden] * (self.layers - 1) + [self.out_features]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if self.compute_ms > 0:
                layers.append(Compute(self.compute_ms / 1e3 / self.layers))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers).to(self.dtype)

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets of step ``step``: the same on every rank (seeded by step)."""
        g = torch.Generator().manual_seed(1000 * self.seed + step)
        x = torch.randn(self.batch, self.in_features, generator=g, dtype=self.dtype)
        y = torch.randn(self.batch, self.out_features, generator=g, dtype=self.dtype)
        return x, y

    def loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean squared error, a mean over the rows given."""
        return nn.functional.mse_loss(out, y)

    def optimizer_defaults(self) -> dict[str, Any]:
        """Plain SGD (deterministic, so the versions can be compared step by step)."""
        return {"lr": self.lr}


# The MLP's parts as functions, for code that takes a Config (notebook 08, scaling, compress).
def make_model(cfg: Config = Config()) -> nn.Module:
    """``cfg.make_model()``."""
    return cfg.make_model()


def global_batch(step: int, cfg: Config = Config()) -> tuple[torch.Tensor, torch.Tensor]:
    """``cfg.global_batch(step)``."""
    return cfg.global_batch(step)


def local_batch(
    step: int, rank: int, world_size: int, cfg: Config = Config()
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cfg.local_batch(step, rank, world_size)``."""
    return cfg.local_batch(step, rank, world_size)


def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The MLP's loss: mean squared error."""
    return nn.functional.mse_loss(out, y)


def baseline(steps: int, cfg: Config = Config()) -> dict[str, list]:
    """``cfg.baseline(steps)``."""
    return cfg.baseline(steps)
