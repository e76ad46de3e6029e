"""Ways to train one model on N ranks: bucketed DDP by hand, ZeRO-1, torch's DDP.

A strategy has three methods, called by :func:`labsupport.capstone.run.train_step`::

    model = strategy.wrap(model, make_optimizer)  # before training: returns the module to call
    loss.backward()
    strategy.finish()                             # after backward: the gradients are reduced
    strategy.step()                               # the optimizer step: the same weights everywhere

``make_optimizer(params)`` builds the course's AdamW; the strategy decides *which*
tensors it optimizes. Each rank builds its own model from its own random seed (as
a program does that does not seed every rank alike), so ``wrap`` must first make
every rank start from rank 0's weights (a broadcast), as torch's DDP does.

* :class:`Strategy` - the common part: the parameters, AdamW on all of them.
* :class:`BucketedDDP` - notebook 07's bucketed, overlapped all-reduce, plus the broadcast.
* :class:`ZeRO1` - optimizer state sharded (Rajbhandari et al. 2020, stage 1): the model's
  parameters live in one flat buffer; after backward a **reduce-scatter** gives each rank
  the average of its 1/p of the gradients; AdamW updates that shard only (its state is
  1/p of DDP's); an **all-gather** of the updated shards writes every rank's parameters.
* :class:`TorchDDP` - ``torch.nn.parallel.DistributedDataParallel`` with the same bucket size.

:func:`model_states` counts the bytes a rank holds for the model's parameters, gradients
and optimizer state (what ZeRO's paper calls *model states*; activations and temporary
buffers are not counted).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport import ddp

# torch 2.13 deprecates all_gather_into_tensor / reduce_scatter_tensor in favour
# of names torch_npu does not have yet: keep the old names, quietly.
for _name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    warnings.filterwarnings("ignore", f".*{_name}.* is deprecated", FutureWarning)

MakeOptimizer = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


def broadcast_parameters(params: list[torch.Tensor], src: int = 0) -> None:
    """Overwrite every rank's parameters with rank ``src``'s (one broadcast per tensor)."""
    with torch.no_grad():
        for p in params:
            dist.broadcast(p.data, src)


class Strategy:
    """The common part: the parameters, AdamW over all of them; the rest is yours.

    ``wrap`` here does *not* broadcast: a subclass must make every rank start from
    rank 0's weights itself (:func:`broadcast_parameters`).
    """

    name = "strategy"

    def __init__(self) -> None:
        self.params: list[nn.Parameter] = []
        self.opt: torch.optim.Optimizer | None = None

    def wrap(self, model: nn.Module, make_optimizer: MakeOptimizer) -> nn.Module:
        """Remember the parameters (``self.params``) and build the optimizer (``self.opt``)."""
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = make_optimizer(self.params)
        return model

    def finish(self) -> None:
        """After backward: return once every ``param.grad`` holds the mean over the ranks."""
        raise NotImplementedError

    def step(self) -> None:
        """The optimizer step (every rank the same, since the gradients are the same)."""
        self.opt.step()


class BucketedDDP(ddp.Bucketed):
    """Notebook 07's buckets (reverse order, all-reduced during backward), AdamW, broadcast."""

    name = "ddp"

    def __init__(self, bucket_bytes: int = 1 << 20) -> None:
        super().__init__(bucket_bytes)
        self.opt: torch.optim.Optimizer | None = None

    def wrap(self, model: nn.Module, make_optimizer: MakeOptimizer) -> nn.Module:  # type: ignore[override]
        broadcast_parameters([p for p in model.parameters() if p.requires_grad])
        super().wrap(model)
        self.opt = make_optimizer(self.params)
        return model

    def _all_reduce(self, tensor: torch.Tensor, info: str = "", async_op: bool = False) -> Any:
        """Average in place: divide, then a plain ``dist.all_reduce`` (traced by the runner)."""
        self.calls += 1
        tensor.div_(dist.get_world_size())
        return dist.all_reduce(tensor, async_op=async_op)

    def step(self) -> None:
        self.opt.step()


class ZeRO1(Strategy):
    """Optimizer state sharded: reduce-scatter the gradients, update 1/p, all-gather the weights."""

    name = "zero1"

    def wrap(self, model: nn.Module, make_optimizer: MakeOptimizer) -> nn.Module:
        self.params = [p for p in model.parameters() if p.requires_grad]
        world, rank = dist.get_world_size(), dist.get_rank()
        self.numel = sum(p.numel() for p in self.params)
        self.shard_size = -(-self.numel // world)  # ceil: the last shard is padded with zeros
        first = self.params[0]
        # The parameters become views into one flat buffer, so an all-gather into the buffer
        # updates them all (what DeepSpeed and FSDP call a flat parameter).
        self.flat = torch.zeros(self.shard_size * world, dtype=first.dtype, device=first.device)
        offset = 0
        for p in self.params:
            self.flat[offset : offset + p.numel()].copy_(p.data.reshape(-1))
            p.data = self.flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        dist.broadcast(self.flat, 0)  # every rank starts from rank 0's weights
        self.lo, self.hi = rank * self.shard_size, (rank + 1) * self.shard_size
        # This rank's slice of the weights, the only thing its optimizer sees and updates.
        self.shard = nn.Parameter(self.flat[self.lo : self.hi].clone())
        self.opt = make_optimizer([self.shard])
        return model

    def finish(self) -> None:
        world = dist.get_world_size()
        flat_grad = torch.zeros_like(self.flat)
        torch.cat([p.grad.reshape(-1) for p in self.params], out=flat_grad[: self.numel])
        flat_grad.div_(world)  # the sum of g/p over the ranks is their mean
        self.shard.grad = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(self.shard.grad, flat_grad)  # my 1/p of the mean

    def step(self) -> None:
        self.opt.step()  # AdamW on my shard only: its state is 1/p of the model's
        with torch.no_grad():
            dist.all_gather_into_tensor(self.flat, self.shard.detach())  # everyone's new weights


class TorchDDP(Strategy):
    """torch's DistributedDataParallel (it broadcasts from rank 0 itself), same bucket size."""

    name = "torch"

    def __init__(self, bucket_bytes: int = 25 << 20) -> None:
        super().__init__()
        self.bucket_bytes = bucket_bytes

    def wrap(self, model: nn.Module, make_optimizer: MakeOptimizer) -> nn.Module:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = make_optimizer(self.params)
        return nn.parallel.DistributedDataParallel(model, bucket_cap_mb=self.bucket_bytes / 2**20)

    def finish(self) -> None:
        """Nothing to do: DDP's backward returns with the gradients averaged."""


STRATEGIES: dict[str, type] = {"ddp": BucketedDDP, "zero1": ZeRO1, "torch": TorchDDP}


def make_strategy(name: str, bucket_bytes: int = 1 << 20) -> Any:
    """A strategy by name (``ddp``, ``zero1``, ``torch``)."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    return ZeRO1() if name == "zero1" else STRATEGIES[name](bucket_bytes)


def _nbytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def model_states(model: nn.Module, optimizers: list[torch.optim.Optimizer]) -> dict[str, int]:
    """Bytes this rank holds: parameters, gradients, optimizer state, optimizer-owned weights.

    ``optimizer state`` is every tensor in the optimizers' ``state`` (AdamW: the two
    moments and a step counter); ``optimizer's weights`` are tensors the optimizers
    update that are not the model's parameters (ZeRO-1's shard; its gradient counts
    with the gradients).
    """
    params = list(model.parameters())
    own = {id(p) for p in params}
    states = [t for opt in optimizers for s in opt.state.values() for t in s.values()]
    theirs = [p for opt in optimizers for g in opt.param_groups for p in g["params"]]
    extra = [p for p in theirs if id(p) not in own]
    return {
        "parameters": _nbytes(params),
        "gradients": _nbytes(p.grad for p in params + extra),
        "optimizer state": _nbytes(states),
        "optimizer's weights": _nbytes(extra),
    }
