"""Expert parallelism: an MoE layer whose experts live on different ranks, joined by all-to-all.

Start at :class:`MoE` (route, dispatch, run the local experts, combine), then
:func:`all_to_all` (``all_to_all_single`` with uneven splits, and its backward). Top-1
routing as in the Switch Transformer (Fedus et al. 2022); experts spread over ranks as
in GShard (Lepikhin et al. 2021).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class _AllToAll(torch.autograd.Function):
    """Rank r sends ``send[r]`` rows to each rank and receives ``recv[r]`` from each."""

    @staticmethod
    def forward(ctx, x, send: list[int], recv: list[int], group) -> torch.Tensor:  # noqa: ANN001
        ctx.splits, ctx.group = (send, recv), group
        out = x.new_empty((sum(recv), *x.shape[1:]))
        dist.all_to_all_single(out, x.detach().contiguous(), recv, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN001, ANN205
        send, recv = ctx.splits  # the gradients go back the way the rows came
        back = grad.new_empty((sum(send), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), send, recv, group=ctx.group)
        return back, None, None, None


def all_to_all(
    x: torch.Tensor, send: list[int], group: dist.ProcessGroup | None = None
) -> tuple[torch.Tensor, list[int]]:
    """Send ``send[j]`` rows of ``x`` (in order) to rank j; (the rows received, from each rank).

    The ranks first swap their counts (one all-to-all of one number per rank), so that
    each knows how much it will receive: the splits are uneven when routing is.
    """
    counts = torch.tensor(send, dtype=torch.int64)
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts, group=group)
    recv_list = recv.tolist()
    return _AllToAll.apply(x, list(send), recv_list, group), recv_list


def route(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-1 routing: (each token's expert, its gate probability)."""
    probs = logits.softmax(dim=-1)
    weight, expert = probs.max(dim=-1)
    return expert, weight


class MoE(nn.Module):
    """A top-1 mixture of experts; rank r of ``group`` holds experts r·k … r·k + k − 1.

    Every rank builds the same ``gate`` and ``experts`` (same seed) and keeps its own
    k = len(experts) / world experts. ``forward(x)`` takes this rank's tokens
    (tokens × hidden) and returns their outputs, in the same order.
    """

    def __init__(self, gate: nn.Linear, experts: nn.ModuleList, group=None) -> None:  # noqa: ANN001
        super().__init__()
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        if len(experts) % world:
            raise ValueError(f"{len(experts)} experts cannot be spread evenly over {world} ranks")
        self.k, self.group, self.world = len(experts) // world, group, world
        self.gate = gate
        self.local = nn.ModuleList(experts[rank * self.k : (rank + 1) * self.k])
        self.last_received: list[int] = []  # tokens this rank received from each rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Dispatch each token to its expert's rank, run it there, bring it back (combine)."""
        expert, weight = route(self.gate(x))
        order = torch.argsort(expert, stable=True)  # tokens grouped by destination rank
        dest = expert[order] // self.k
        send = torch.bincount(dest, minlength=self.world).tolist()
        # dispatch: the tokens, and which of the receiver's experts each one is for
        tokens, recv = all_to_all(x[order], send, self.group)
        which, _ = all_to_all((expert[order] % self.k).unsqueeze(1).float(), send, self.group)
        self.last_received = recv
        out = torch.zeros_like(tokens)
        for j, ffn in enumerate(self.local):
            mine = which[:, 0] == j
            if mine.any():
                out = out.index_put((mine.nonzero()[:, 0],), ffn(tokens[mine]))
        # combine: every output goes back to the rank its token came from, in order
        back, _ = all_to_all(out, recv, self.group)
        result = torch.empty_like(back)
        result = result.index_put((order,), back)
        return result * weight.unsqueeze(-1)


def moe_reference(x: torch.Tensor, gate: nn.Linear, experts: nn.ModuleList) -> torch.Tensor:
    """One process: every token through its top-1 expert, scaled by its gate probability."""
    expert, weight = route(gate(x))
    out = torch.zeros_like(x)
    for j, ffn in enumerate(experts):
        mine = expert == j
        if mine.any():
            out = out.index_put((mine.nonzero()[:, 0],), ffn(x[mine]))
    return out * weight.unsqueeze(-1)


def imbalance(received: list[int]) -> float:
    """The busiest rank's tokens over the mean: 1.0 when the routing is balanced."""
    return max(received) * len(received) / max(sum(received), 1)
