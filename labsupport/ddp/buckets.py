"""Which gradients travel together: torch's bucket rule, with the size in MiB as torch takes it.

Start at :func:`assign_buckets` (the rule), then :func:`bucket_caps` (the caps torch
computes from ``bucket_cap_mb``) and :func:`param_buckets` (a model's parameters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

MiB = 1 << 20
#: torch's default ``bucket_cap_mb``.
DEFAULT_BUCKET_CAP_MB = 25
#: torch's first bucket cap with the default ``bucket_cap_mb`` (1 MiB).
FIRST_BUCKET_BYTES = 1 << 20
#: ``bucket_cap_mb=ONE_BUCKET`` (infinity): all gradients in one bucket, as torch does for
#: its first iteration, before it has seen the order gradients arrive in.
ONE_BUCKET = math.inf


def bucket_caps(bucket_cap_mb: float | None) -> tuple[float, float]:
    """(the first bucket's cap, every other bucket's cap) in bytes, as torch computes them."""
    # torch 2.13: _BucketCapacityConfig in torch/nn/parallel/distributed.py and
    # Reducer::rebuild_buckets. None means torch's default, 25 MiB, *and* a smaller first
    # bucket of 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES): the first gradients
    # of backward leave early. With a cap you choose, every bucket has that cap.
    if bucket_cap_mb is None:
        return FIRST_BUCKET_BYTES, DEFAULT_BUCKET_CAP_MB * MiB
    if not bucket_cap_mb > 0:  # also refuses NaN
        raise ValueError(
            f"bucket_cap_mb must be a positive number of MiB, None (torch's default, 25 MiB "
            f"with a 1 MiB first bucket) or ONE_BUCKET; got {bucket_cap_mb!r}"
        )
    # The cap is in MiB: bucket_cap_mb * 2**20 bytes, rounded down.
    cap = math.inf if math.isinf(bucket_cap_mb) else int(bucket_cap_mb * MiB)
    return cap, cap


def assign_buckets(sizes: Sequence[int], bucket_cap_mb: float | None) -> list[list[int]]:
    """Indices ``0 .. len(sizes)-1``, in order, grouped into buckets by torch's rule.

    ``sizes[i]`` is the byte size of the i-th gradient in the order they are
    produced. A bucket closes once the bytes in it reach its cap (see
    :func:`bucket_caps`); the tensor that crosses the cap stays in it. What
    ``torch.distributed._compute_bucket_assignment_by_size`` gives (tests check it).
    """
    first, cap = bucket_caps(bucket_cap_mb)
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, size in enumerate(sizes):
        current.append(i)
        filled += size
        # torch's DistributedDataParallel(bucket_cap_mb=...) closes a bucket once it holds
        # *at least* its cap, the tensor that crosses the cap included: a tensor larger than
        # the cap gets a bucket of its own, and a cap is not a maximum.
        if filled >= (cap if buckets else first):
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def trainable(module: nn.Module) -> list[nn.Parameter]:
    """The parameters that get gradients, each once (tied weights once), in registration order."""
    return [p for p in module.parameters() if p.requires_grad]


def param_buckets(params: Sequence[torch.Tensor], bucket_cap_mb: float | None) -> list[list]:
    """The parameters in buckets: reverse order (backward's), then :func:`assign_buckets`."""
    # Reverse registration order: the order backward produces them in a model whose layers
    # run in the order they were defined. torch instead rebuilds the buckets after the first
    # iteration from the order in which gradients really arrived, and keeps tensors of
    # different dtypes or devices in separate buckets (refused here).
    order = list(params)[::-1]
    if len({(p.dtype, p.device) for p in order}) > 1:
        raise ValueError(
            "the parameters have several dtypes or devices; torch keeps each in buckets of "
            "its own, the course's buckets do not: convert the model to one dtype and device"
        )
    sizes = [p.numel() * p.element_size() for p in order]
    return [[order[i] for i in b] for b in assign_buckets(sizes, bucket_cap_mb)]


def bucket_sizes(module: nn.Module, bucket_cap_mb: float | None) -> list[int]:
    """Bytes of each bucket of ``module``'s gradients, in the order they are sent."""
    buckets = param_buckets(trainable(module), bucket_cap_mb)
    return [sum(p.numel() * p.element_size() for p in b) for b in buckets]
