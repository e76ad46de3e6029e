"""Data-parallel training by hand, from naive to bucketed with overlap, and torch's own DDP.

Each version is an ``nn.Module`` wrapper built like ``torch.nn.parallel.DistributedDataParallel``
(the plumbing is :class:`~labsupport.ddp.base.DDPBase`'s): wrap the model, train as usual,
and ``loss.backward()`` returns with every gradient averaged over the ranks. Read them in
order, :class:`Naive` first: each one changes one of the three hooks.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.ddp.base import DDPBase
from labsupport.ddp.buckets import param_buckets


class Naive(DDPBase):
    """One blocking all-reduce per parameter, after backward."""

    def wait_for_gradients(self) -> None:
        """All-reduce every gradient, one at a time, after backward: nothing overlaps."""
        for p in self.params:
            # Averaging: each rank divides its gradient by the world size, then the
            # all-reduce sums: the sum of the g/p is the mean.
            p.grad.div_(self.world_size)
            dist.all_reduce(p.grad, group=self.process_group)


class Flat(DDPBase):
    """One all-reduce of every gradient copied into one flat buffer, after backward."""

    def wait_for_gradients(self) -> None:
        """Copy every gradient into one flat buffer, all-reduce it once, copy the means back."""
        grads = [p.grad for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(self.world_size)
        dist.all_reduce(flat, group=self.process_group)
        for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(part.view_as(g))


class Overlapped(DDPBase):
    """One asynchronous all-reduce per parameter, issued from its hook during backward."""

    def prepare_for_backward(self) -> None:
        """Start this backward with no all-reduce in flight."""
        self.handles: list[Any] = []

    def grad_ready(self, param: nn.Parameter) -> None:
        """All-reduce this gradient now, asynchronously, while backward goes on."""
        # The hook's argument is the *parameter*: all-reduce param.grad, not param.
        param.grad.div_(self.world_size)
        self.handles.append(dist.all_reduce(param.grad, group=self.process_group, async_op=True))

    def wait_for_gradients(self) -> None:
        """Wait for the all-reduces issued during backward (each averaged a gradient in place)."""
        # The wait must happen before optimizer.step(): here, before backward() returns.
        for work in self.handles:
            work.wait()
        self.handles = []


class Bucketed(DDPBase):
    """Buckets by torch's rule, all-reduced during backward once ready, in bucket order.

    The rule (``bucket_cap_mb`` in MiB) is :mod:`labsupport.ddp.buckets`'.
    """

    def __init__(
        self, module: nn.Module, bucket_cap_mb: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(module, **kwargs)
        self.bucket_cap_mb = bucket_cap_mb
        self.buckets = param_buckets(self.params, bucket_cap_mb)
        self.bucket_of = {id(p): k for k, b in enumerate(self.buckets) for p in b}

    def prepare_for_backward(self) -> None:
        """Count each bucket's gradients still to come; bucket 0 is the next to send."""
        self.missing = [len(b) for b in self.buckets]  # gradients not ready yet, per bucket
        self.next_bucket = 0  # the next bucket to send: they leave in order
        self.in_flight: list[tuple[Any, torch.Tensor, list[nn.Parameter]]] = []

    def grad_ready(self, param: nn.Parameter) -> None:
        """Send every bucket that is complete and whose predecessors have all been sent."""
        self.missing[self.bucket_of[id(param)]] -= 1
        # A bucket leaves once complete *and* every bucket before it has been sent: in
        # bucket order, as torch's Reducer sends them, so that every rank issues the same
        # all-reduces in the same order.
        while self.next_bucket < len(self.buckets) and self.missing[self.next_bucket] == 0:
            bucket = self.buckets[self.next_bucket]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).div_(self.world_size)
            work = dist.all_reduce(flat, group=self.process_group, async_op=True)
            self.in_flight.append((work, flat, bucket))
            self.next_bucket += 1

    def wait_for_gradients(self) -> None:
        """Wait for each bucket's all-reduce and copy its means back into the gradients."""
        for work, flat, bucket in self.in_flight:
            work.wait()
            for p, part in zip(bucket, flat.split([p.numel() for p in bucket]), strict=True):
                p.grad.copy_(part.view_as(p.grad))
        self.in_flight = []


class TorchDDP(nn.parallel.DistributedDataParallel):
    """torch's ``DistributedDataParallel``; on an NPU or GPU, ``device_ids`` is the module's device.

    ``bucket_cap_mb=ONE_BUCKET`` (infinity) asks torch for one bucket of every gradient.
    """

    def __init__(
        self, module: nn.Module, bucket_cap_mb: float | None = None, **kwargs: Any
    ) -> None:
        device = next(module.parameters()).device
        if device.type != "cpu":
            kwargs.setdefault("device_ids", [device.index or 0])
        if bucket_cap_mb is not None and math.isinf(bucket_cap_mb):
            bucket_cap_mb = float(1 << 40)  # torch needs a finite number: 1 TiB of MiB is plenty
        super().__init__(module, bucket_cap_mb=bucket_cap_mb, **kwargs)

    def finish_gradient_synchronization(self) -> None:
        """Nothing to do: torch's backward returns with the gradients averaged."""
