"""ZeRO-1 as a ``torch.optim.Optimizer``: the optimizer state sharded over the ranks.

Start at :class:`ZeRO1` (the ZeRO paper's stage 1: its two methods are the algorithm),
then :class:`ZeRO1Base` (``ZeroRedundancyOptimizer``'s constructor and the plumbing);
:func:`model_states` counts what a rank holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.dist_names import quiet_renamed

quiet_renamed()  # torch 2.13 deprecates two names torch_npu still needs (see dist_names)


class ZeRO1Base(torch.optim.Optimizer):
    """``ZeroRedundancyOptimizer``'s constructor and plumbing; a subclass shards and steps.

    The constructor is ``torch.distributed.optim.ZeroRedundancyOptimizer``'s::

        opt = ZeRO1(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
        opt = ZeRO1([{"params": decay, "weight_decay": 0.1},
                     {"params": no_decay, "weight_decay": 0.0}], torch.optim.AdamW, lr=1e-3)
        loss.backward(); opt.step(); opt.zero_grad()

    The plumbing: hyperparameters kept in step with the local optimizer, ``zero_grad``.
    A subclass's :meth:`shard` must leave ``self.flat`` (one buffer of which every
    parameter is a view) and return the local optimizer, whose parameter groups
    match ``self.param_groups`` one for one and whose tensors are slices of
    ``self.flat`` (this rank's shard). :meth:`sharded_step` does a step.
    """

    def __init__(
        self,
        params: Iterable[Any],
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.AdamW,
        process_group: dist.ProcessGroup | None = None,
        **defaults: Any,
    ) -> None:
        self._built = False
        super().__init__(params, defaults)
        self.optimizer_class = optimizer_class
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.flat: torch.Tensor | None = None
        self.optim = self.shard()
        if len(self.optim.param_groups) != len(self.param_groups):
            raise ValueError(
                f"shard() returned an optimizer with {len(self.optim.param_groups)} parameter "
                f"groups; it needs one per group given ({len(self.param_groups)}), even empty"
            )
        for group, local in zip(self.param_groups, self.optim.param_groups, strict=True):
            for key, value in local.items():  # the class's defaults, so that schedulers see lr
                if key != "params":
                    group.setdefault(key, value)
        self.state = self.optim.state  # this rank's shard's state only
        self._built = True

    def shard(self) -> torch.optim.Optimizer:
        """Flatten the parameters into ``self.flat``, take my shard, build its optimizer."""
        raise NotImplementedError

    def sharded_step(self) -> None:
        """Reduce-scatter the gradients, step the shard, all-gather the parameters."""
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Pass the hyperparameters (an lr schedule's) to the shard's optimizer; sharded_step."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group, local in zip(self.param_groups, self.optim.param_groups, strict=True):
            local.update({k: v for k, v in group.items() if k != "params"})  # lr schedules
        self.sharded_step()
        return loss

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As torch's while the constructor runs; afterwards refused: the shards are cut."""
        if self._built:
            raise NotImplementedError(
                "ZeRO1 shards the parameters it was built with: add none later"
            )
        super().add_param_group(param_group)

    def state_dict(self) -> dict[str, Any]:
        """Refused: each rank holds only its shard's state (save ``opt.optim.state_dict()``)."""
        raise NotImplementedError(
            "ZeRO1 keeps each shard's optimizer state on its own rank: save "
            "opt.optim.state_dict() on every rank (ZeroRedundancyOptimizer gathers it "
            "with consolidate_state_dict)"
        )


class ZeRO1(ZeRO1Base):
    """ZeRO stage 1: reduce-scatter the local gradients, step this rank's shard, all-gather.

    The constructor is torch's ``ZeroRedundancyOptimizer``'s, but the algorithm is the
    ZeRO paper's stage 1 (Rajbhandari et al. 2020), not torch's: torch's assigns whole
    parameters to ranks and relies on DDP's all-reduce for the gradients; here every
    parameter is a view of one flat buffer of which each rank owns a slice (:meth:`shard`),
    and a step reduce-scatters the gradients itself (:meth:`sharded_step`).
    """

    def shard(self) -> torch.optim.Optimizer:
        """One flat buffer (padded to p's multiple), the parameters its views; optimize my slice."""
        params = [p for g in self.param_groups for p in g["params"]]
        if len({(p.dtype, p.device) for p in params}) > 1:
            raise ValueError("ZeRO1 needs every parameter in one dtype on one device")
        numel = sum(p.numel() for p in params)
        # Rank r owns elements r·n/p .. (r+1)·n/p of the flat buffer (n padded to p's multiple).
        self.shard_size = -(-numel // self.world_size)  # ceil: the last shard is padded
        self.flat = torch.zeros(
            self.shard_size * self.world_size, dtype=params[0].dtype, device=params[0].device
        )
        self.offsets: dict[int, int] = {}
        offset = 0
        with torch.no_grad():
            for p in params:  # each parameter becomes a view of the flat buffer
                self.flat[offset : offset + p.numel()].copy_(p.reshape(-1))
                p.data = self.flat[offset : offset + p.numel()].view_as(p)
                self.offsets[id(p)] = offset
                offset += p.numel()
        dist.broadcast(self.flat, 0, group=self.process_group)  # everyone starts from rank 0's
        self.lo, self.hi = self.rank * self.shard_size, (self.rank + 1) * self.shard_size
        self.grad_shard = torch.zeros_like(self.flat[self.lo : self.hi])
        self.pieces: list[tuple[nn.Parameter, torch.Tensor, int, int]] = []
        # Parameter groups (a different weight decay, say) work because the shard is cut per
        # parameter: the local optimizer has one group per group, holding this rank's pieces
        # of that group's parameters (views of the flat buffer).
        groups = []
        for group in self.param_groups:
            mine = []
            for p in group["params"]:
                a = max(self.offsets[id(p)], self.lo)
                b = min(self.offsets[id(p)] + p.numel(), self.hi)
                if a < b and p.requires_grad:  # my piece of p: elements a..b of the flat buffer
                    piece = self.flat[a:b]
                    mine.append(piece)
                    self.pieces.append((p, piece, a, b))
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": mine})
        return self.optimizer_class(groups, **self.defaults)

    def sharded_step(self) -> None:
        """Reduce-scatter the flat gradients (each over p), step my shard, all-gather the shards."""
        # Gradient accumulation needs nothing: .grad accumulates locally until step().
        flat_grad = torch.zeros_like(self.flat)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    o = self.offsets[id(p)]
                    flat_grad[o : o + p.numel()].copy_(p.grad.reshape(-1))
        # The reduce-scatter does the averaging (the sum of g/p over the ranks is their mean),
        # so ZeRO1 works with a plain model, no DDP wrapper. Under a DDP wrapper, whose
        # gradients arrive averaged already, the numbers are the same (the mean of equal
        # gradients), at an all-reduce's extra traffic.
        flat_grad.div_(self.world_size)
        # 1. Reduce-scatter the ranks' local gradients: rank r gets the mean of its shard only.
        dist.reduce_scatter_tensor(self.grad_shard, flat_grad, group=self.process_group)
        for p, piece, a, b in self.pieces:  # a piece without a gradient is skipped, as torch does
            piece.grad = None if p.grad is None else self.grad_shard[a - self.lo : b - self.lo]
        # 2. The local optimizer (optimizer_class) steps the shard: its state (AdamW's two
        # moments) exists for 1/p of the parameters.
        self.optim.step()
        # 3. All-gather the updated shards into the flat buffer: every rank's parameters are
        # the new ones.
        mine = self.flat[self.lo : self.hi]  # in place: my shard is already where it goes
        dist.all_gather_into_tensor(self.flat, mine, group=self.process_group)


def _storages(tensors: Iterable[Any]) -> dict[int, int]:
    """Storage address -> bytes, each storage once."""
    out: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            s = t.untyped_storage()
            out[s.data_ptr()] = s.nbytes()
    return out


def model_states(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes this rank holds for the model: parameters, gradients, optimizer state, extra weights.

    Each storage is counted once (a ZeRO1 shard is a view of the parameters: no extra
    bytes). ``gradients``: the parameters' ``.grad`` and the gradients the optimizer
    holds (ZeRO1's shard); ``optimizer state``: every tensor in its state (AdamW: two
    moments and a step counter); ``optimizer's weights``: tensors it updates that are
    not the parameters' storage. Activations and temporary buffers are not counted.
    """
    inner = getattr(optimizer, "optim", optimizer)  # ZeRO1: the local optimizer
    params = list(model.parameters())
    own = _storages(params)
    theirs = [p for g in inner.param_groups for p in g["params"]]
    grads = _storages([p.grad for p in params] + [p.grad for p in theirs])
    states = _storages(t for s in inner.state.values() for t in s.values())
    extra = {k: v for k, v in _storages(theirs).items() if k not in own}
    return {
        "parameters": sum(own.values()),
        "gradients": sum(grads.values()),
        "optimizer state": sum(states.values()),
        "optimizer's weights": sum(extra.values()),
    }
