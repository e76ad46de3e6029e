"""The compression methods as DDP communication hooks, by name.

Start at :func:`register` (a method's name -> its hook on a DDP model); :func:`topk_hook`
is the one hook written here.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel

from labsupport.compress.fp16 import bf16_allreduce_hook
from labsupport.compress.topk import topk_error_feedback
from labsupport.compress.wire import topk_count

METHODS = ("none", "fp16", "bf16", "powersgd", "topk")
#: A plain function ``(grad, residual, k) -> (average, new residual)``, as in the exercise.
TopKFunction = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class TopKState:
    """What :func:`topk_hook` keeps between steps: each bucket's residual."""

    ratio: float = 0.01
    error_feedback: bool = True
    function: TopKFunction = topk_error_feedback
    residuals: dict[int, torch.Tensor] = field(default_factory=dict)
    bucket_sizes: dict[int, int] = field(default_factory=dict)


def topk_hook(state: TopKState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A DDP comm hook: the bucket replaced by the average of every rank's top-k (all-gathered).

    It runs the all-gathers before returning (a completed future), so this bucket's
    communication does not overlap the rest of backward; torch's hooks chain futures
    instead. Simpler to read, and the same bytes.
    """
    buffer = bucket.buffer()
    index = bucket.index()
    state.bucket_sizes[index] = buffer.numel()
    residual = state.residuals.get(index)
    if residual is None:
        residual = torch.zeros_like(buffer)
    k = topk_count(buffer.numel(), state.ratio)
    average, new_residual = state.function(buffer, residual, k)
    if state.error_feedback:
        state.residuals[index] = new_residual
    buffer.copy_(average)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buffer)
    return fut


def register(
    model: DistributedDataParallel,
    method: str,
    *,
    rank: int = 2,
    ratio: float = 0.01,
    error_feedback: bool = True,
    start_iter: int = 2,
    topk_function: TopKFunction | None = None,
) -> Any:
    """Register ``method``'s hook on ``model``; returns its state (PowerSGDState, TopKState...)."""
    if method == "none":  # torch's allreduce_hook: what DDP does without a hook
        state, hook = None, default_hooks.allreduce_hook
    elif method == "fp16":  # torch's own
        state, hook = None, default_hooks.fp16_compress_hook
    elif method == "bf16":  # ours: torch's own bf16 hook is refused on gloo (see fp16.py)
        state, hook = None, bf16_allreduce_hook
    elif method == "powersgd":
        # torch's powerSGD_hook with a PowerSGDState of rank ``rank``, error feedback and warm
        # start, compressing from step ``start_iter``: torch's PowerSGD skips compression for
        # its first start_powerSGD_iter steps (at least 2 with error feedback): count bytes
        # after those.
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=rank,
            start_powerSGD_iter=start_iter,
            use_error_feedback=True,
            warm_start=True,
        )
        hook = powerSGD_hook.powerSGD_hook
    elif method == "topk":  # topk_hook: top-k of ``ratio``, with or without error feedback
        state = TopKState(ratio, error_feedback, topk_function or topk_error_feedback)
        hook = topk_hook
    else:
        raise ValueError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    # DDP now calls hook(state, bucket) for every bucket of gradients instead of its
    # all-reduce; the hook returns a torch.futures.Future whose value is the averaged bucket.
    model.register_comm_hook(state, hook)
    return state
