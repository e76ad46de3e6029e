"""ZeRO-2 and ZeRO-3 (FSDP) as an ``nn.Module`` wrapper: each layer's parameters sharded.

Start at :class:`ZeRO3` (how it is used, and the four moments of a layer), then
:class:`FlatUnit` (one layer's parameters: a flat buffer of which this rank keeps 1/p).
:class:`ZeRO2` is the same with the parameters never freed.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn


class FlatUnit:
    """One unit's (a layer's) parameters as views of one flat buffer; this rank owns a shard.

    ``full`` holds every parameter of the unit, padded to a multiple of p; its memory
    exists only while the unit is gathered (:meth:`gather`, :meth:`free`). ``shard``, an
    ``nn.Parameter`` of 1/p of the elements, is what the optimizer steps and what stays.
    """

    def __init__(self, module: nn.Module, keep_full: bool, group: Any = None) -> None:
        self.group, self.keep_full = group, keep_full
        p, rank = dist.get_world_size(group), dist.get_rank(group)
        named = [(n, t) for n, t in module.named_parameters() if t.requires_grad]
        numel = sum(t.numel() for _, t in named)
        self.size = -(-numel // p)  # shard size: ceil, the last shard is padded
        self.full = torch.zeros(self.size * p, dtype=named[0][1].dtype, device=named[0][1].device)
        self.views: list[torch.Tensor] = []
        offset = 0
        for name, t in named:
            self.full[offset : offset + t.numel()].copy_(t.detach().reshape(-1))
            # As torch's FSDP1 does: the module's parameter becomes a plain tensor, a view of
            # the flat buffer, so that the module's parameters() no longer lists it (the
            # optimizer steps the shards) and its gradient is the unit's to reduce.
            owner, _, attr = name.rpartition(".")
            sub = module.get_submodule(owner)
            delattr(sub, attr)
            view = self.full[offset : offset + t.numel()].view_as(t).requires_grad_()
            setattr(sub, attr, view)
            self.views.append(view)
            offset += t.numel()
        dist.broadcast(self.full, dist.get_global_rank(group, 0) if group else 0, group=group)
        mine = self.full[rank * self.size : (rank + 1) * self.size]
        # ZeRO-2 keeps the whole buffer, so its shard can be a view of it (no extra memory);
        # ZeRO-3 frees the buffer after use, so its shard must be memory of its own.
        self.shard = nn.Parameter(mine if keep_full else mine.clone())
        self.work: Any = None  # the all-gather in flight, if any
        self.incoming: torch.Tensor | None = None  # where it arrives
        self.gathered = True  # full holds the current parameters
        self.free()

    def gather(self, async_op: bool) -> None:
        """All-gather every rank's shard (async: leave it in flight; else wait for it)."""
        if not self.gathered and self.work is None:
            # Into a buffer of its own, copied out on arrival, as torch's FSDP2 does: gloo
            # writes the result on its own thread, where autograd would see an in-place change.
            self.incoming = torch.empty_like(self.full)
            self.work = dist.all_gather_into_tensor(
                self.incoming, self.shard.detach(), group=self.group, async_op=True
            )
        if not async_op:
            self.wait()

    def wait(self) -> None:
        """Wait for the all-gather in flight; copy it into ``full`` (its memory back, if freed)."""
        if self.work is not None:
            self.work.wait()
            storage = self.full.untyped_storage()
            if storage.nbytes() == 0:  # torch's FSDP2 frees and re-allocates the same way
                storage.resize_(self.full.numel() * self.full.element_size())
            # Autograd saved these views for backward: writing the same values back into
            # them is not the in-place change its version check catches (FSDP2 does the same).
            with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(self.full):
                self.full.copy_(self.incoming)
            self.work = self.incoming = None
        self.gathered = True

    def free(self) -> None:
        """Forget the gathered parameters; ZeRO-3 gives their memory back (the storage, to 0)."""
        self.gathered = False
        if not self.keep_full:
            self.full.untyped_storage().resize_(0)

    def reduce_scatter(self) -> tuple[Any, torch.Tensor]:
        """Start reduce-scattering the mean gradient (async); frees the full gradients."""
        p = dist.get_world_size(self.group)
        flat = torch.zeros_like(self.full)  # the padding stays zero
        offset = 0
        for v in self.views:
            flat[offset : offset + v.numel()].copy_(v.grad.reshape(-1)).div_(p)
            offset += v.numel()
            v.grad = None  # only the shard of the mean gradient stays (ZeRO-2's saving)
        out = torch.empty_like(self.shard)
        work = dist.reduce_scatter_tensor(out, flat, group=self.group, async_op=True)
        return work, out


class ZeRO3(nn.Module):
    """ZeRO-3 (FSDP's full sharding) as a wrapper: ``ZeRO3(model)``, then train as usual::

        model = ZeRO3(net, prefetch=True)           # each child with parameters: a unit
        opt = torch.optim.AdamW(model.parameters())  # the shards: 1/p of the elements
        loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()

    Each unit (a layer; ``units``, in the order forward runs them) is gathered before its
    forward and freed after it, gathered again before its backward, and after its backward
    its gradients are reduce-scattered (each rank keeps its shard of the mean) and it is
    freed again. With ``prefetch`` the next unit's all-gather is issued as a unit starts,
    so that it travels while this unit computes (in forward the next unit, in backward the
    one before), and the last unit stays gathered from forward to backward, which needs it
    first. The four moments are the four methods under "a unit's four moments".
    """

    keep_full = False  # ZeRO-2 keeps the gathered parameters

    def __init__(
        self, module: nn.Module, units: Any = None, prefetch: bool = True, process_group: Any = None
    ) -> None:
        super().__init__()
        self.prefetch, self.process_group = prefetch, process_group
        units = list(module.children() if units is None else units)
        units = [u for u in units if any(t.requires_grad for t in u.parameters())]
        self.units = [FlatUnit(u, self.keep_full, process_group) for u in units]
        left = [n for n, t in module.named_parameters() if t.requires_grad]
        if left:
            raise ValueError(f"parameters in no unit: {', '.join(left)}; pass units covering all")
        self.module = module  # registered after its parameters became views: none listed
        self.shards = nn.ParameterList([u.shard for u in self.units])
        self.pending: list[tuple[Any, torch.Tensor, FlatUnit]] = []
        for k, u in enumerate(units):
            u.register_forward_pre_hook(lambda _m, _a, k=k: self.before_forward(k))
            u.register_forward_hook(lambda _m, _a, out, k=k: self._forward_done(k, out))
            for v in self.units[k].views:
                v.register_post_accumulate_grad_hook(lambda _v, k=k: self._grad_ready(k))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward, with each unit gathered around its own."""
        self.missing = [len(u.views) for u in self.units]  # gradients still to come, per unit
        self.backward_started = False
        return self.module(*args, **kwargs)

    # ------------------------------------------------------------ a unit's four moments
    def before_forward(self, k: int) -> None:
        """Unit k's forward begins: its parameters must be here; send for the next unit's."""
        self.units[k].gather(async_op=False)  # waits for the prefetch, if one is in flight
        if self.prefetch and k + 1 < len(self.units):
            self.units[k + 1].gather(async_op=True)  # travels while unit k computes

    def after_forward(self, k: int) -> None:
        """Unit k's forward is done: free its parameters, unless backward needs them first."""
        if not (self.prefetch and k == len(self.units) - 1):
            self.units[k].free()  # gone until backward gathers it again

    def before_backward(self, k: int) -> None:
        """Unit k's backward begins: its parameters again; send for the unit before it."""
        self.units[k].gather(async_op=False)
        if self.prefetch and k > 0:
            self.units[k - 1].gather(async_op=True)  # backward runs the units in reverse

    def after_backward(self, k: int) -> None:
        """Unit k's gradients are complete: reduce-scatter them (async), free its parameters."""
        work, out = self.units[k].reduce_scatter()
        self.pending.append((work, out, self.units[k]))
        self.units[k].free()

    # ------------------------------------------------------------ the plumbing
    def _forward_done(self, k: int, out: Any) -> None:
        if not torch.is_grad_enabled():  # no backward will come (evaluation)
            self.units[k].free()
            return
        self.after_forward(k)
        # A hook on the unit's output runs when backward reaches it: before the unit's backward.
        for t in out if isinstance(out, tuple) else (out,):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda _g, k=k: self._backward_begins(k))

    def _backward_begins(self, k: int) -> None:
        if not self.backward_started:  # backward's first unit: wait for the rest at its end
            self.backward_started = True
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
        self.before_backward(k)

    def _grad_ready(self, k: int) -> None:
        self.missing[k] -= 1
        if self.missing[k] == 0:  # the unit's backward is done
            self.after_backward(k)

    def _finish(self) -> None:
        """End of backward: wait for the reduce-scatters; each shard's .grad holds its mean."""
        for work, out, unit in self.pending:
            work.wait()
            unit.shard.grad = out if unit.shard.grad is None else unit.shard.grad + out
        self.pending = []


class ZeRO2(ZeRO3):
    """ZeRO-2: the parameters stay whole on every rank; gradients and optimizer state sharded.

    The same moments as :class:`ZeRO3`, but a unit's parameters are never freed: before
    its forward the all-gather brings every rank's freshly stepped shard (the ZeRO paper
    does it right after the step), and backward needs no second all-gather.
    """

    keep_full = True

    def after_forward(self, k: int) -> None:
        """Nothing: ZeRO-2 keeps the parameters for backward."""
