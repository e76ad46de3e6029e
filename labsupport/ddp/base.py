"""The plumbing of a data-parallel wrapper, as torch's ``DistributedDataParallel`` has it.

:class:`DDPBase` is what every version in :mod:`labsupport.ddp.versions` shares; start
at its docstring (how a wrapper is used), then :meth:`DDPBase._on_grad` (what happens
during backward). A subclass writes three methods, under "what a subclass writes".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.ddp.buckets import trainable


# Marks the wait at the end of backward on a rank's timeline. Nothing here records it:
# the runtime's harness (labsupport/runtime/experiments/ddp_runs.py) replaces it by
# its trace's ``span`` on the ranks it times.
def span(name: str) -> contextlib.AbstractContextManager[Any]:
    """A span named ``name`` on this rank's timeline: nothing, until the runtime sets it."""
    return contextlib.nullcontext()


class DDPBase(nn.Module):
    """An ``nn.Module`` wrapper with torch DDP's plumbing, used exactly like torch's::

        model = Bucketed(net, bucket_cap_mb=25)       # broadcasts rank 0's parameters and buffers
        loss = loss_fn(model(x), y)                   # model.module is net
        loss.backward()                               # every .grad is the mean over the ranks here
        optimizer.step()

        with model.no_sync():                         # gradient accumulation: no communication
            loss_fn(model(x0), y0).backward()
        loss_fn(model(x1), y1).backward()             # synchronizes the accumulated gradients

    What every version shares is done here, as torch does it: the broadcast at
    construction, a hook per parameter during backward, the gradients averaged when
    ``backward()`` returns, unused parameters, :meth:`no_sync`. A subclass writes the
    core: :meth:`prepare_for_backward`, :meth:`grad_ready`, :meth:`wait_for_gradients`.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        process_group: dist.ProcessGroup | None = None,
        find_unused_parameters: bool = False,
    ) -> None:
        super().__init__()
        self.module = module
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        #: The trainable parameters, each once (tied weights once), in registration order.
        self.params: list[nn.Parameter] = trainable(module)
        if not self.params:
            raise ValueError(
                "the module has no parameter that requires a gradient: nothing to sync"
            )
        self._names = {id(p): name for name, p in module.named_parameters()}
        self._sync_next_backward = False  # set by forward
        self._syncing = False  # a synchronizing backward has begun and not finished
        self._ready: set[int] = set()
        # Every parameter (frozen ones too) and every buffer from rank 0, so that ranks that
        # built their models from different seeds start equal. torch's DDP also
        # re-broadcasts the buffers at every forward (``forward_sync_buffers``, on by
        # default); the course's versions do not, so that the traffic they are measured
        # by is the gradients' only.
        self.broadcast_module_states()
        # During backward, each trainable parameter's hook calls grad_ready once its
        # .grad is complete (accumulated), through _on_grad.
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self.params]

    # ------------------------------------------------------------ what a subclass writes
    # The core, three methods: a synchronizing backward begins (prepare_for_backward), a
    # gradient is complete (grad_ready), backward is done: send what is left, wait, and
    # leave the mean in every .grad (wait_for_gradients).
    def prepare_for_backward(self) -> None:
        """A synchronizing backward begins (its first gradient is ready): reset per-step state."""

    def grad_ready(self, param: nn.Parameter) -> None:
        """``param.grad`` is complete for this backward (called from its hook, during backward)."""

    def wait_for_gradients(self) -> None:
        """Backward is done: on return every ``param.grad`` holds the mean over the ranks."""
        raise NotImplementedError

    # ------------------------------------------------------------ the plumbing
    def broadcast_module_states(self) -> None:
        """Overwrite every parameter and buffer with rank 0's (a broadcast per dtype and device)."""
        states = [t.detach() for t in (*self.module.parameters(), *self.module.buffers())]
        groups: dict[tuple, list[torch.Tensor]] = {}
        for t in states:
            groups.setdefault((t.dtype, t.device), []).append(t)
        src = dist.get_global_rank(self.process_group, 0) if self.process_group else 0
        with torch.no_grad():
            for tensors in groups.values():
                flat = torch.cat([t.reshape(-1) for t in tensors])
                dist.broadcast(flat, src, group=self.process_group)
                for t, part in zip(tensors, flat.split([t.numel() for t in tensors]), strict=True):
                    t.copy_(part.view_as(t))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward; decides whether the coming backward synchronizes."""
        if self._syncing:  # the last synchronizing backward failed half-way (an exception)
            self._syncing = False
        # Whether the coming backward communicates (no_sync) is decided here, when forward
        # runs, as torch decides it: a backward after the no_sync block still does not sync.
        if torch.is_grad_enabled():  # an evaluation under no_grad changes nothing (as in torch)
            self._sync_next_backward = self.require_backward_grad_sync
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Within the block, forward-backward passes accumulate gradients without communication."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    def _on_grad(self, param: nn.Parameter) -> None:
        if not self._sync_next_backward:
            return
        if not self._syncing:  # the first gradient of this backward
            self._syncing = True
            self._ready.clear()
            # A callback with the autograd engine, queued at the first gradient (as
            # picotron does; torch's Reducer queues its own once the last bucket has been
            # launched, in mark_variable_ready): it runs when backward's computation is
            # done, so backward() returns with the gradients averaged.
            torch.autograd.Variable._execution_engine.queue_callback(
                self.finish_gradient_synchronization
            )
            self.prepare_for_backward()
        if id(param) in self._ready:
            raise RuntimeError(
                f"parameter {self._names.get(id(param), '?')} got its gradient twice in one "
                "backward (a reentrant backward or retain_graph=True): the wrapper cannot "
                "send it twice"
            )
        self._ready.add(id(param))
        self.grad_ready(param)

    def finish_gradient_synchronization(self) -> None:
        """Finish the running synchronization: unused parameters, then :meth:`wait_for_gradients`.

        Called by the autograd engine when backward's computation is done; calling it
        again, or when no backward synchronizes, does nothing.
        """
        if not self._syncing:
            return
        self._sync_next_backward = False  # a second backward before forward does not sync
        try:
            # A trainable parameter whose gradient never came (not used in forward): an
            # error that names it, or, with find_unused_parameters=True, a zero gradient
            # (see _mark_unused). torch finds them when forward returns, by walking the
            # autograd graph, so that their buckets can leave during backward; here they
            # are found when backward ends, and their buckets leave then (torch raises the
            # error at the next forward instead).
            missing = [p for p in self.params if id(p) not in self._ready]
            restore = self._mark_unused(missing) if missing else None
            with span("wait"):
                self.wait_for_gradients()
            if restore is not None:
                restore()
        finally:
            self._syncing = False

    def _mark_unused(self, missing: list[nn.Parameter]) -> Any:
        """Count parameters without a gradient as zeros; returns what resets the globally unused."""
        if not self.find_unused_parameters:
            names = ", ".join(self._names.get(id(p), "?") for p in missing)
            raise RuntimeError(
                f"{len(missing)} trainable parameter(s) got no gradient in this backward: {names}. "
                "Their buckets would never be complete, so no rank could finish. Use them in "
                "forward (every output should reach the loss), freeze them "
                "(requires_grad_(False)) before wrapping, or pass find_unused_parameters=True, "
                "as with torch's DistributedDataParallel."
            )
        # As torch does, one more small all-reduce tells every rank which parameters no
        # rank used: their .grad stays as it was (None), see restore below.
        used = torch.tensor(
            [id(p) in self._ready for p in self.params],
            dtype=torch.int32,
            device=self.params[0].device,
        )
        work = dist.all_reduce(used, group=self.process_group, async_op=True)
        was_none = []
        for p in reversed(missing):  # the order backward would have produced them in
            if p.grad is None:
                p.grad = torch.zeros_like(p)
                was_none.append(p)
            self._ready.add(id(p))
            self.grad_ready(p)

        def restore() -> None:
            work.wait()
            everyone = dict(zip(map(id, self.params), used.tolist(), strict=True))
            for p in was_none:
                if everyone[id(p)] == 0:  # no rank used it: leave its .grad as it was
                    p.grad = None

        return restore
