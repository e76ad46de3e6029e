"""torch.distributed's own Python, run on an emulated network, costs no emulated time.

A call such as ``dist.all_reduce(x)`` runs some Python before the backend sees
it (argument checks, the default group, options): tens of microseconds of CPU
on a laptop, more on a busy one, a few on a fast server, where it is part of
the library's launch overhead that α already stands for. On an emulated network
α is the link's latency, so :func:`hide_library_calls` wraps torch.distributed's
communication functions in :func:`labsupport.runtime.emulator.clock.hidden`: the clock
stands still from the call until the operation is issued, a blocking call
moves it to the operation's end, and nothing else is charged. Your own code
around the calls (a ring written with send and recv, its additions) still costs
its CPU time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from labsupport import dist_names
from labsupport.runtime.emulator import clock

#: The functions of torch.distributed that move data or wait for other ranks: the core's
#: one list (:data:`labsupport.dist_names.CALLS`).
CALLS = dist_names.CALLS


def _hidden(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with clock.hidden():
            return fn(*args, **kwargs)

    call.__netem_hidden__ = True  # type: ignore[attr-defined]
    return call


def hide_library_calls() -> None:
    """Wrap torch.distributed's communication functions (idempotent)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    for name in CALLS:
        fn = getattr(c10d, name, None)
        if fn is None or getattr(fn, "__netem_hidden__", False):
            continue
        wrapped = _hidden(fn)  # one object in both places: P2POp compares dist.isend by identity
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)
