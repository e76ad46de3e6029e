"""Top-k sparsification with error feedback: send the k largest gradient entries, keep the rest.

Start at :func:`topk`, then the wrong sum (:func:`topk_allreduce_wrong`), the right one
(:func:`topk_allgather`) and error feedback (:func:`topk_error_feedback`, :class:`TopK`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from labsupport.compress.wire import topk_count


def topk(flat: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(indices, values) of the ``k`` entries of a 1-D tensor with the largest magnitude.

    Each rank keeps these and sends them as (index, value) pairs.
    """
    indices = flat.abs().topk(k, sorted=False).indices
    return indices, flat[indices]


def sparse(indices: torch.Tensor, values: torch.Tensor, numel: int) -> torch.Tensor:
    """A dense 1-D tensor of ``numel`` zeros with ``values`` added at ``indices``."""
    out = torch.zeros(numel, dtype=values.dtype, device=values.device)
    return out.index_add_(0, indices, values)


def topk_allreduce_wrong(flat: torch.Tensor, k: int) -> torch.Tensor:
    """THE COMMON MISTAKE: all-reduce the k values, as if every rank had picked the same indices.

    Each rank then puts the summed values at *its own* indices: the ranks disagree
    with each other and with the true sum. Returns this rank's (wrong) average.
    """
    indices, values = topk(flat, k)
    # The ranks pick *different indices*: entry j of rank 0's values and entry j of rank 1's
    # belong to different coordinates, and the all-reduce adds them anyway.
    dist.all_reduce(values)
    return sparse(indices, values / dist.get_world_size(), flat.numel())


def topk_allgather(flat: torch.Tensor, k: int) -> torch.Tensor:
    """The average over the ranks of every rank's top-k of ``flat``: all-gather the pairs.

    Two all-gathers of ``k`` entries per rank: the indices (int64) and the values.
    Every rank ends with the same dense tensor.
    """
    # The right way: all-gather every rank's pairs and add each value at its own index.
    return allgather_pairs(*topk(flat, k), flat.numel())


def allgather_pairs(indices: torch.Tensor, values: torch.Tensor, numel: int) -> torch.Tensor:
    """Every rank's (index, value) pairs all-gathered, summed into a dense tensor, over p."""
    p = dist.get_world_size()
    all_indices = [torch.empty_like(indices) for _ in range(p)]
    all_values = [torch.empty_like(values) for _ in range(p)]
    dist.all_gather(all_indices, indices)
    dist.all_gather(all_values, values)
    return sparse(torch.cat(all_indices), torch.cat(all_values), numel).div_(p)


def topk_error_feedback(
    grad: torch.Tensor, residual: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of top-k with error feedback: (the average over the ranks, the new residual).

    ``grad`` and ``residual`` are this rank's 1-D tensors; neither is changed.
    """
    # Error feedback (Stich et al. 2018; Lin et al. 2018 call it local gradient
    # accumulation): what a rank did not send this step is not thrown away but added to its
    # next gradient, so every coordinate is sent eventually. Without it, small coordinates
    # are never updated and training converges to a worse point, or more slowly (notebook 08
    # shows both curves).
    corrected = grad + residual
    indices, values = topk(corrected, k)
    new_residual = corrected.index_fill(0, indices, 0.0)  # what this rank did not send
    return allgather_pairs(indices, values, grad.numel()), new_residual


class TopK:
    """Top-k with (or without) error feedback for one flat gradient: ``average = topk(grad)``.

    ``ratio`` is the share of entries sent (0.01 = 1 %). ``residual`` holds what this
    rank has not sent yet; with ``error_feedback=False`` it stays zero.
    """

    def __init__(self, ratio: float = 0.01, error_feedback: bool = True) -> None:
        self.ratio = ratio
        self.error_feedback = error_feedback
        self.residual: torch.Tensor | None = None

    def __call__(self, flat: torch.Tensor) -> torch.Tensor:
        """The average over the ranks of what they send this step (``flat`` is not changed)."""
        if self.residual is None:
            self.residual = torch.zeros_like(flat)
        k = topk_count(flat.numel(), self.ratio)
        average, residual = topk_error_feedback(flat, self.residual, k)
        if self.error_feedback:
            self.residual = residual
        return average


def topk_wrong_and_right(numel: int = 12, k: int = 3) -> dict[str, object]:
    """On every rank: this rank's top-k of a random gradient, summed the wrong and the right way.

    Returns the indices this rank picked, the true average of what the ranks send (every
    rank's top-k as a dense tensor, all-reduced), and the results of
    :func:`topk_allreduce_wrong` and :func:`topk_allgather`. Notebook 08 and its deck
    both run this.
    """
    grad = torch.randn(numel, generator=torch.Generator().manual_seed(10 + dist.get_rank()))
    indices, values = topk(grad, k)
    truth = sparse(indices, values, numel)  # what this rank sends, as a dense tensor
    dist.all_reduce(truth)
    truth /= dist.get_world_size()
    wrong = topk_allreduce_wrong(grad, k)
    right = topk_allgather(grad, k)
    return {"indices": sorted(indices.tolist()), "truth": truth, "wrong": wrong, "right": right}
