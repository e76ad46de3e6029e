"""Tensor and sequence parallelism: Megatron's MLP split over the ranks of a group.

Start at :class:`ParallelMLP` (column- then row-parallel, the f and g operators), then
:class:`SequenceParallelMLP` (the same with each all-reduce replaced by an all-gather
before and a reduce-scatter after). Shoeybi et al. (2019), "Megatron-LM", §3;
Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer
Models", §4.2.2.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from labsupport.dist_names import quiet_renamed

quiet_renamed()  # torch 2.13 deprecates two names torch_npu still needs (see dist_names)

# Megatron's MLP is Y = GeLU(X A) B. Split A by columns and B by rows over t ranks:
# rank i computes GeLU(X A_i) B_i, a partial sum of Y, with no communication until the
# end, where one all-reduce adds the t partial sums. Backward mirrors it: the gradient
# that flows back into X is a partial sum too, and needs one all-reduce. Megatron calls
# the two conjugate operators f (identity forward, all-reduce backward) and g
# (all-reduce forward, identity backward).


class _F(torch.autograd.Function):
    """f: identity forward, all-reduce of the gradient backward (enters the block)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:  # noqa: ANN001
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _G(torch.autograd.Function):
    """g: all-reduce forward, identity backward (leaves the block)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:  # noqa: ANN001
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        return grad, None


def f(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's f: ``x`` unchanged; in backward, its gradient all-reduced over ``group``."""
    return _F.apply(x, group)


def g(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's g: ``x`` all-reduced over ``group``; in backward, the gradient unchanged."""
    return _G.apply(x, group)


def _shard(t: torch.Tensor, dim: int, group: dist.ProcessGroup | None) -> torch.Tensor:
    """This rank's slice of ``t`` along ``dim`` (equal slices, in rank order)."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    return t.detach().chunk(world, dim)[rank].clone()


class ParallelMLP(nn.Module):
    """Linear → GeLU → Linear split over ``group``: one all-reduce forward, one backward.

    Built from a dense ``fc1`` (h → 4h) and ``fc2`` (4h → h): rank i keeps rows i of
    ``fc1`` (the column split of A = fc1.weightᵀ) and columns i of ``fc2`` (the row
    split of B). ``fc2``'s bias is added once, after the all-reduce.
    """

    def __init__(self, fc1: nn.Linear, fc2: nn.Linear, group: dist.ProcessGroup | None = None):
        super().__init__()
        self.group = group
        self.w1 = nn.Parameter(_shard(fc1.weight, 0, group))  # column-parallel
        self.b1 = nn.Parameter(_shard(fc1.bias, 0, group))
        self.w2 = nn.Parameter(_shard(fc2.weight, 1, group))  # row-parallel
        self.b2 = nn.Parameter(fc2.bias.detach().clone())

    def partial(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's partial sum of the output, before g: GeLU(x A_i) B_i."""
        return F.linear(F.gelu(F.linear(x, self.w1, self.b1)), self.w2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` is whole on every rank; so is the output."""
        return g(self.partial(f(x, self.group)), self.group) + self.b2


# Sequence parallelism: outside the MLP (layer norm, dropout) the activations of a
# sequence are cut along the sequence over the t ranks, so each rank holds 1/t of them.
# Entering the block they are all-gathered (g-bar); leaving it, the partial sums are
# reduce-scattered along the sequence (instead of all-reduced). An all-reduce *is* a
# reduce-scatter then an all-gather, so the bytes on the wire are the same.


class _AllGather(torch.autograd.Function):
    """All-gather along dim 0 forward; reduce-scatter of the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:  # noqa: ANN001
        ctx.group = group
        out = x.new_empty((x.shape[0] * dist.get_world_size(group), *x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        return _reduce_scatter(grad, ctx.group), None


class _ReduceScatter(torch.autograd.Function):
    """Reduce-scatter along dim 0 forward; all-gather of the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:  # noqa: ANN001
        ctx.group = group
        return _reduce_scatter(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        out = grad.new_empty((grad.shape[0] * dist.get_world_size(ctx.group), *grad.shape[1:]))
        dist.all_gather_into_tensor(out, grad.contiguous(), group=ctx.group)
        return out, None


def _reduce_scatter(x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """Sum ``x`` over ``group``; keep this rank's slice of dim 0."""
    out = x.new_empty((x.shape[0] // dist.get_world_size(group), *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out


class SequenceParallelMLP(ParallelMLP):
    """:class:`ParallelMLP` on sequence-sharded activations: all-gather in, reduce-scatter out.

    ``x`` is this rank's slice of the sequence (dim 0); so is the output.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's rows of the output, for this rank's rows of the input."""
        whole = _AllGather.apply(x, self.group)
        return _ReduceScatter.apply(self.partial(whole), self.group) + self.b2
