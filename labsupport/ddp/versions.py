"""Data-parallel training by hand, from naive to bucketed with overlap, and torch's DDP.

Every version has the same two methods, called by :func:`labsupport.ddp.run.train_step`::

    model = version.wrap(model)      # returns the module to call forward on
    loss.backward()
    version.finish()                 # all gradients averaged over the ranks when it returns
    optimizer.step()

* :class:`Naive` - after backward, one blocking ``all_reduce`` per parameter.
* :class:`Flat` - after backward, one ``all_reduce`` of all gradients in one flat buffer.
* :class:`Overlapped` - a ``register_post_accumulate_grad_hook`` per parameter issues its
  all-reduce (``async_op=True``) as soon as its gradient is ready, during backward;
  ``finish`` waits for them. The hook's argument is the *parameter*: all-reduce
  ``param.grad``, not ``param`` (that would average the weights).
* :class:`Bucketed` - parameters in reverse order (the order backward produces gradients)
  grouped into buckets of at least ``bucket_bytes``; a bucket's all-reduce is issued when
  its last gradient is ready. Fewer, larger messages: less α, same overlap.
* :class:`TorchDDP` - ``torch.nn.parallel.DistributedDataParallel`` with ``bucket_cap_mb``.

Every collective is recorded with :func:`labsupport.trace.comm` (lane "comm"); ``calls``
counts the all-reduces issued. Waiting must happen *before* ``optimizer.step()``: a step
taken on gradients still being reduced uses whatever the buffer holds at that moment.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport import trace


class Version:
    """The common part: the parameters, the world size, a count of all-reduce calls."""

    name = "version"

    def __init__(self) -> None:
        self.calls = 0
        self.params: list[nn.Parameter] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        """Remember ``model``'s parameters; return the module to call forward on."""
        self.params = [p for p in model.parameters() if p.requires_grad]
        return model

    def finish(self) -> None:
        """After backward: return once every ``param.grad`` holds the mean over the ranks."""
        raise NotImplementedError

    def _all_reduce(self, tensor: torch.Tensor, info: str = "", async_op: bool = False) -> Any:
        """Average ``tensor`` over the ranks in place (divide, then sum), recorded in the trace."""
        self.calls += 1
        tensor.div_(dist.get_world_size())
        return trace.comm(dist.all_reduce, tensor, name="all_reduce", info=info, async_op=async_op)


class Naive(Version):
    """One blocking all-reduce per parameter, after backward."""

    name = "naive"

    def finish(self) -> None:
        for i, p in enumerate(self.params):
            self._all_reduce(p.grad, info=f"param {i}")


class Flat(Version):
    """One all-reduce of every gradient copied into one flat buffer, after backward."""

    name = "flat"

    def finish(self) -> None:
        grads = [p.grad for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self._all_reduce(flat, info="all gradients")
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


class Overlapped(Version):
    """One asynchronous all-reduce per parameter, issued by a hook as its gradient is ready."""

    name = "overlap"

    def __init__(self) -> None:
        super().__init__()
        self.handles: list[Any] = []
        self._hooks: list[Any] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        super().wrap(model)
        for i, p in enumerate(self.params):
            self._hooks.append(p.register_post_accumulate_grad_hook(self._hook(i)))
        return model

    def _hook(self, index: int) -> Any:
        def hook(param: nn.Parameter) -> None:  # the parameter, not its gradient
            self.handles.append(self._all_reduce(param.grad, f"param {index}", async_op=True))

        return hook

    def finish(self) -> None:
        for work in self.handles:
            work.wait()
        self.handles.clear()

    def remove_hooks(self) -> None:
        """Unregister the hooks (the model trains without communication again)."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()


def make_buckets(sizes: list[int], bucket_bytes: int) -> list[list[int]]:
    """Group indices ``0..len(sizes)-1`` in order: a bucket closes once it holds ``bucket_bytes``.

    ``sizes[i]`` is the byte size of the i-th tensor in the order gradients become ready
    (reverse parameter order). A tensor larger than ``bucket_bytes`` ends its bucket.
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive; got {bucket_bytes}")
    buckets: list[list[int]] = [[]]
    filled = 0
    for i, size in enumerate(sizes):
        buckets[-1].append(i)
        filled += size
        if filled >= bucket_bytes and i < len(sizes) - 1:
            buckets.append([])
            filled = 0
    return buckets


def bucket_bytes(model: nn.Module, bucket_size: int) -> list[int]:
    """Bytes of each bucket :class:`Bucketed` would make for ``model``, in the order sent."""
    params = [p for p in model.parameters() if p.requires_grad][::-1]
    sizes = [p.numel() * p.element_size() for p in params]
    return [sum(sizes[i] for i in b) for b in make_buckets(sizes, bucket_size)]


class Bucketed(Overlapped):
    """Buckets of at least ``bucket_bytes``, in reverse parameter order, all-reduced when full."""

    name = "bucket"

    def __init__(self, bucket_bytes: int = 1 << 20) -> None:
        super().__init__()
        self.bucket_bytes = bucket_bytes
        self.buckets: list[list[nn.Parameter]] = []
        self._waiting: list[int] = []
        self._flat: list[tuple[torch.Tensor, list[nn.Parameter]]] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        Version.wrap(self, model)
        order = self.params[::-1]  # backward produces the last layer's gradients first
        sizes = [p.numel() * p.element_size() for p in order]
        self.buckets = [[order[i] for i in b] for b in make_buckets(sizes, self.bucket_bytes)]
        self._bucket_of = {id(p): k for k, b in enumerate(self.buckets) for p in b}
        self._waiting = [len(b) for b in self.buckets]
        for p in self.params:
            self._hooks.append(p.register_post_accumulate_grad_hook(self._ready))
        return model

    def _ready(self, param: nn.Parameter) -> None:
        k = self._bucket_of[id(param)]
        self._waiting[k] -= 1
        if self._waiting[k] == 0:  # the bucket's last gradient: send it
            bucket = self.buckets[k]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            self.handles.append(self._all_reduce(flat, f"bucket {k}", async_op=True))
            self._flat.append((flat, bucket))

    def finish(self) -> None:
        super().finish()  # wait for every bucket
        for flat, bucket in self._flat:
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
                offset += p.numel()
        self._flat.clear()
        self._waiting = [len(b) for b in self.buckets]


class TorchDDP(Version):
    """torch's DistributedDataParallel with the same bucket size (its all-reduces are its own)."""

    name = "torch"

    def __init__(self, bucket_bytes: int = 25 << 20) -> None:
        super().__init__()
        self.bucket_bytes = bucket_bytes

    def wrap(self, model: nn.Module) -> nn.Module:
        super().wrap(model)
        device = next(model.parameters()).device  # an npu/cuda model: DDP wants its index
        ids = None if device.type == "cpu" else [device.index or 0]
        return nn.parallel.DistributedDataParallel(
            model, device_ids=ids, bucket_cap_mb=self.bucket_bytes / 2**20
        )

    def finish(self) -> None:
        """Nothing to do: DDP's backward returns with the gradients averaged."""


VERSIONS = {"naive": Naive, "flat": Flat, "overlap": Overlapped, "bucket": Bucketed,
            "torch": TorchDDP}  # fmt: skip


def make_version(name: str, bucket_bytes: int = 1 << 20) -> Version:
    """A version by name (``naive``, ``flat``, ``overlap``, ``bucket``, ``torch``)."""
    if name not in VERSIONS:
        raise ValueError(f"unknown version {name!r}; choose one of: {', '.join(VERSIONS)}")
    if name in ("bucket", "torch"):
        return VERSIONS[name](bucket_bytes)
    return VERSIONS[name]()
