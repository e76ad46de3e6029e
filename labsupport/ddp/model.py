"""The model, data and single-process baseline that every data-parallel version is checked against.

A small MLP (a few MB of float32 parameters), synthetic data from fixed seeds,
and plain SGD. With ``Config(compute_ms=...)`` each linear layer also waits, by
sleeping, in its forward and twice as long in its backward: an accelerator's
compute, during which the host CPU is free for communication (on a 2-core
laptop, real matrix products of 4 ranks leave no core for the emulated
network's threads). ``global_batch(step)`` is the same on every rank and in the
baseline; rank ``r`` of ``p`` trains on rows ``r*b/p .. (r+1)*b/p`` of it. The
loss is a mean over the rank's rows, so averaging the ranks' gradients gives
exactly the baseline's gradient of the mean over the whole batch (up to float
rounding): that is what makes the versions comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from labsupport.netem.clock import compute


@dataclass(frozen=True)
class Config:
    """Sizes of the model and the data. The defaults: 4 layers, about 3.7 MB of parameters."""

    in_features: int = 256
    hidden: int = 512
    layers: int = 4
    out_features: int = 16
    batch: int = 64  # the global batch, split evenly over the ranks
    lr: float = 0.05
    seed: int = 0
    compute_ms: float = 0.0  # > 0: forward sleeps this long in all, backward twice as long

    def param_bytes(self) -> int:
        """Bytes of all parameters (float32)."""
        return sum(p.numel() * p.element_size() for p in make_model(self).parameters())


class _Sleep(torch.autograd.Function):
    """Identity that sleeps ``seconds`` forward and twice that backward (emulated compute)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, seconds: float) -> torch.Tensor:  # noqa: ANN001, D102
        ctx.seconds = seconds
        compute(seconds)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001, D102
        compute(2 * ctx.seconds)
        return grad, None


class Compute(nn.Module):
    """A layer's emulated accelerator time: sleeps, computes nothing (see :class:`Config`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _Sleep.apply(x, self.seconds)


def make_model(cfg: Config = Config()) -> nn.Sequential:
    """The MLP, initialised from ``cfg.seed`` (the same weights on every rank)."""
    torch.manual_seed(cfg.seed)
    widths = [cfg.in_features] + [cfg.hidden] * (cfg.layers - 1) + [cfg.out_features]
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if cfg.compute_ms > 0:
            layers.append(Compute(cfg.compute_ms / 1e3 / cfg.layers))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def global_batch(step: int, cfg: Config = Config()) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of step ``step``: the same on every rank (seeded by step)."""
    g = torch.Generator().manual_seed(1000 * cfg.seed + step)
    x = torch.randn(cfg.batch, cfg.in_features, generator=g)
    y = torch.randn(cfg.batch, cfg.out_features, generator=g)
    return x, y


def local_batch(
    step: int, rank: int, world_size: int, cfg: Config = Config()
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of :func:`global_batch` (the batch must divide evenly)."""
    if cfg.batch % world_size:
        raise ValueError(
            f"the global batch {cfg.batch} does not split evenly over {world_size} ranks: "
            f"use a batch that is a multiple of {world_size}"
        )
    x, y = global_batch(step, cfg)
    n = cfg.batch // world_size
    return x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]


def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error, a mean over the rows given."""
    return nn.functional.mse_loss(out, y)


def make_optimizer(model: nn.Module, cfg: Config = Config()) -> torch.optim.Optimizer:
    """Plain SGD (deterministic, so the versions can be compared step by step)."""
    return torch.optim.SGD(model.parameters(), lr=cfg.lr)


def baseline(steps: int, cfg: Config = Config()) -> dict[str, list[torch.Tensor]]:
    """One process, the whole global batch: the last step's gradients and the final weights."""
    model = make_model(cfg)
    opt = make_optimizer(model, cfg)
    grads: list[torch.Tensor] = []
    for step in range(steps):
        x, y = global_batch(step, cfg)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
    return {"grads": grads, "weights": [p.detach().clone() for p in model.parameters()]}
