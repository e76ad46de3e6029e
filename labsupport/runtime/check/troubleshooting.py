"""Graders for notebook 09 (troubleshooting): three broken programs to fix.

Each ``check_*`` runs your fixed function on every rank of the running cluster,
next to a working reference, with a short timeout (a program that still hangs costs
seconds, and the ranks are restarted). It says what is still wrong: where each rank
was blocked, which error a rank raised, or which rank returned a wrong value, with
a hint about the bug that notebook 09 shows. The references live here, so reading
this file gives the answers away: try first.

* Exercise 09.1, ``global_mean(values)``: one rank has no values (an empty tensor),
  and the broken version returns early on that rank, skipping the collectives.
* Exercise 09.2, ``gather_variable(values)``: rank r holds r + 1 values; the broken
  version all-gathers tensors of different shapes.
* Exercise 09.3, ``pipeline(x)``: stage r receives from r - 1, computes ``2x + r``,
  sends to r + 1; the last stage sends the result back to rank 0, which broadcasts
  it. The broken version never receives it on rank 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from labsupport.runtime.check import CheckResult, check_on_ranks
from labsupport.runtime.language import _

#: Seconds each check gives your function on the ranks.
TIMEOUT = 10.0
#: The rank with no values in Exercise 09.1.
EMPTY_RANK = 1

# ------------------------------------------------------------------ inputs


def _device() -> torch.device:
    from labsupport.runtime.launch import rank_device

    return rank_device()


def _mean_input(rank: int, world_size: int) -> tuple[torch.Tensor]:
    """Rank EMPTY_RANK has no values; rank r has r + 2 values 10r, 10r + 1, ..."""
    count = 0 if rank == EMPTY_RANK else rank + 2
    return (torch.arange(count, dtype=torch.float32, device=_device()) + 10 * rank,)


def _variable_input(rank: int, world_size: int) -> tuple[torch.Tensor]:
    """Rank r holds r + 1 values 10r, 10r + 1, ...: every value says where it came from."""
    return (torch.arange(rank + 1, dtype=torch.float32, device=_device()) + 10 * rank,)


def _pipeline_input(rank: int, world_size: int) -> tuple[torch.Tensor]:
    """Rank 0 holds the pipeline's input; the other ranks a buffer of the same shape."""
    x = torch.tensor([1.0, 2.0, 3.0]) if rank == 0 else torch.zeros(3)
    return (x.to(_device()),)


# -------------------------------------------------------------- references


def _global_mean_reference(values: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    both = torch.stack([values.sum(), torch.tensor(float(values.numel()), device=values.device)])
    dist.all_reduce(both)  # every rank calls it, with or without values
    return both[0] / both[1]


def _gather_variable_reference(values: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    size = dist.get_world_size()
    length = torch.tensor([values.numel()], device=values.device)
    lengths = [torch.empty_like(length) for _ in range(size)]
    dist.all_gather(lengths, length)
    longest = max(int(n) for n in lengths)
    padded = torch.zeros(longest, dtype=values.dtype, device=values.device)
    padded[: values.numel()] = values
    pieces = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(pieces, padded)
    return torch.cat([piece[: int(n)] for piece, n in zip(pieces, lengths, strict=True)])


def _pipeline_reference(x: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    rank, size = dist.get_rank(), dist.get_world_size()
    if rank > 0:
        dist.recv(x, src=rank - 1)
    x = x * 2 + rank
    dist.send(x, dst=(rank + 1) % size)  # the last stage sends back to rank 0
    if rank == 0:
        dist.recv(x, src=size - 1)
    dist.broadcast(x, src=0)
    return x


# ----------------------------------------------------------------- graders


def check_global_mean(
    fn: Callable[[torch.Tensor], torch.Tensor], *, cluster: Any = None, timeout: float = TIMEOUT
) -> CheckResult:
    """Exercise 09.1: ``fn(values)`` returns the mean of every rank's values, on every rank,
    also when one rank has none."""
    return check_on_ranks(
        fn,
        _global_mean_reference,
        _mean_input,
        name=_("Exercise 09.1 (global mean; rank {rank} has no values)").format(rank=EMPTY_RANK),
        cluster=cluster,
        timeout=timeout,
        hints={
            "timeout": _(
                "Still a hang: rank {rank} (no values) did not call the "
                "collectives the others wait in. Every rank must call every collective, the "
                "same number of times: contribute a sum of 0 and a count of 0 instead of "
                "returning early."
            ).format(rank=EMPTY_RANK),
            "ZeroDivisionError": _(
                "A rank with no values must still take part; divide only "
                "after the all_reduce, by the total count."
            ),
        },
    )


def check_gather_variable(
    fn: Callable[[torch.Tensor], torch.Tensor], *, cluster: Any = None, timeout: float = TIMEOUT
) -> CheckResult:
    """Exercise 09.2: ``fn(values)`` returns every rank's values concatenated in rank order,
    when rank r holds r + 1 of them."""
    mismatch = _(
        "all_gather needs the same shape on every rank: gather the lengths first, pad "
        "your values to the longest, all_gather, then cut each piece to its length."
    )
    return check_on_ranks(
        fn,
        _gather_variable_reference,
        _variable_input,
        name=_("Exercise 09.2 (all_gather of different lengths)"),
        cluster=cluster,
        timeout=timeout,
        exact=True,
        hints={"WorkerDied": mismatch, "RuntimeError": mismatch, "timeout": mismatch},
    )


def check_pipeline(
    fn: Callable[[torch.Tensor], torch.Tensor], *, cluster: Any = None, timeout: float = TIMEOUT
) -> CheckResult:
    """Exercise 09.3: ``fn(x)`` runs the pipeline (stage r computes 2x + r) and returns the
    last stage's output on every rank."""
    return check_on_ranks(
        fn,
        _pipeline_reference,
        _pipeline_input,
        name=_("Exercise 09.3 (pipeline, result back to rank 0)"),
        cluster=cluster,
        timeout=timeout,
        exact=True,
        hints={
            "timeout": _(
                "Still a hang: a blocking send waits until its receiver posts the "
                "matching recv. Which rank is blocked in send, to whom? That rank must "
                "receive it (dist.recv with the right src) before the broadcast."
            )
        },
    )
