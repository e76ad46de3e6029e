"""Exact inputs and results for the benchmark's checks.

Every input is a small integer stored in the benchmark's dtype, chosen so that
the reduced result is an integer too, exactly representable (see
:func:`input_values`). The expected result is therefore known exactly and
``#wrong`` counts mismatched elements with ``!=``, no tolerance.
"""

from __future__ import annotations

import torch


def input_values(rank: int, nranks: int, index: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """The integer that ``rank`` puts at each position of ``index`` (an int64 tensor).

    ``op`` "copy" (collectives that only move data): 1..101, different on every
    rank, so a piece in the wrong place is caught. For reductions, small values
    whose reduction over ranks is an exact integer in every dtype, and not the
    same at every position:
    sum/min/max: 1..4, so a sum is at most 4n (exact in bfloat16 up to 64
    ranks, int8 up to 31); prod: one rank per element brings 2..4, all others
    1; avg: ranks come in pairs bringing c+1 and c-1 (an odd last rank brings
    c), so the mean is exactly c.
    """
    if op == "copy":
        return (index + 13 * rank) % 101 + 1
    if op == "prod":
        return torch.where((index + rank) % nranks == 0, index % 3 + 2, 1)
    if op == "avg":
        pair_offset = 0 if (rank == nranks - 1 and nranks % 2) else (1 if rank % 2 == 0 else -1)
        return index % 3 + 2 + pair_offset
    return (index + rank) % 2 + index % 3 + 1


def reduced_values(nranks: int, index: torch.Tensor, op: str) -> torch.Tensor:
    """The exact result of reducing :func:`input_values` over all ranks (int64)."""
    acc = input_values(0, nranks, index, op)
    for r in range(1, nranks):
        v = input_values(r, nranks, index, op)
        if op in ("sum", "avg"):
            acc = acc + v
        elif op == "prod":
            acc = acc * v
        elif op == "min":
            acc = torch.minimum(acc, v)
        else:
            acc = torch.maximum(acc, v)
    return acc // nranks if op == "avg" else acc


def fill(t: torch.Tensor, rank: int, nranks: int, op: str, start: int = 0) -> None:
    """Write :func:`input_values` of ``rank`` into ``t``, for positions from ``start`` on."""
    index = torch.arange(start, start + t.numel(), device=t.device)
    t.copy_(input_values(rank, nranks, index, op))


def count_wrong(result: torch.Tensor, expected: torch.Tensor) -> int:
    """How many elements of ``result`` differ from ``expected`` (exactly)."""
    return int((result != expected.to(result.dtype)).sum())
