"""Bytes on the wire: what each compression method sends per step, from a formula.

Start at :func:`step_bytes` (every method); the ring's counts are the two functions below
the constants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Every count here is the total over all ranks of the payload bytes they send (the 8-byte
# time stamp of the emulated network is not counted, nor is it by
# labsupport.runtime.emulator.traffic).
FLOAT32, FLOAT16, INT64 = 4, 2, 8


def ring_allreduce_bytes(numel: int, element_size: int, p: int) -> int:
    """Bytes all ranks send in a ring all-reduce of ``numel`` elements: ``2(p-1)·numel·size``."""
    # Summing over the ranks makes this exact for any size: a ring all-reduce splits n
    # elements into p chunks, however uneven, and every chunk is sent p - 1 times in the
    # reduce-scatter and p - 1 times in the all-gather, so 2(p-1)·n elements leave the ranks
    # in all (2(p-1)/p·n per rank when p divides n).
    return 2 * (p - 1) * numel * element_size


def ring_allgather_bytes(numel_per_rank: int, element_size: int, p: int) -> int:
    """Bytes all ranks send in a ring all-gather of ``numel_per_rank`` each: ``p(p-1)·m·size``."""
    # Each rank's piece of m elements is sent p - 1 times.
    return p * (p - 1) * numel_per_rank * element_size


def as_matrix(shape: Sequence[int]) -> tuple[int, int]:
    """The matrix torch's PowerSGD hook sees: ``shape[0]`` rows, the rest as columns."""
    rows = shape[0] if shape else 1
    return rows, math.prod(shape) // rows if rows else 0


def powersgd_split(
    shapes: Sequence[Sequence[int]], rank: int, min_compression_rate: float = 2.0
) -> tuple[int, int, int]:
    """(uncompressed elements, P elements, Q elements) torch's ``powerSGD_hook`` all-reduces."""
    plain = ps = qs = 0
    for shape in shapes:
        n, m = as_matrix(shape)
        r = min(n, m, rank)
        if (n + m) * r * min_compression_rate < n * m:
            ps, qs = ps + n * r, qs + m * r
        else:
            plain += n * m
    return plain, ps, qs


def topk_count(numel: int, ratio: float) -> int:
    """How many elements top-k keeps of ``numel``: ``ceil(ratio·numel)``, at least 1."""
    if not 0 < ratio <= 1:
        raise ValueError(f"the top-k ratio must be in (0, 1]; got {ratio} (1 % is 0.01)")
    return max(1, math.ceil(ratio * numel))


def step_bytes(
    method: str,
    shapes: Sequence[Sequence[int]],
    p: int,
    *,
    rank: int = 2,
    ratio: float = 0.01,
    min_compression_rate: float = 2.0,
    buckets: Sequence[int] | None = None,
) -> int:
    """Bytes all ranks send per step for ``method``, for a model of gradient ``shapes``.

    ``buckets``: element counts of the DDP buckets (top-k picks ``k`` per bucket);
    default one bucket holding every gradient.
    """
    numel = sum(math.prod(s) for s in shapes)
    if method == "none":  # one all-reduce of every gradient (4 bytes each, float32)
        return ring_allreduce_bytes(numel, FLOAT32, p)
    if method == "fp16":  # the same elements in 2 bytes
        return ring_allreduce_bytes(numel, FLOAT16, p)
    if method == "powersgd":
        # torch's powerSGD_hook: each gradient viewed as a matrix shape[0] × rest is
        # compressed to rank r' = min(rows, cols, r) only if (rows + cols)·r' ·
        # min_compression_rate < rows·cols; the others (biases) are all-reduced as they are.
        # Three all-reduces: the uncompressed elements, the P factors (rows·r' each) and the
        # Q factors (cols·r' each).
        plain, ps, qs = powersgd_split(shapes, rank, min_compression_rate)
        return sum(ring_allreduce_bytes(n, FLOAT32, p) for n in (plain, ps, qs))
    if method == "topk":
        # labsupport.compress.topk.topk_allgather: k (index, value) pairs per rank,
        # all-gathered: k int64 indices and k float32 values.
        ks = [topk_count(b, ratio) for b in (buckets or [numel])]
        return sum(ring_allgather_bytes(k, INT64 + FLOAT32, p) for k in ks)
    raise ValueError(f"unknown method {method!r}; choose none, fp16, powersgd or topk")
