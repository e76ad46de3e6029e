"""The reduction ops: what each ``torch.distributed.ReduceOp`` does when two pieces meet.

The one table of them (issue 32): the schedule executor, the emulated collectives and
the benchmark all read it. Start at :data:`COMBINE`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

R = dist.ReduceOp.RedOpType
Combine = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: ReduceOp -> ``combine(mine, got)``: fold a received piece ``got`` into this rank's
#: ``mine``, in place, and return ``mine``. A reduction is this, once per message that
#: arrives, in the order the algorithm's steps bring them.
COMBINE: dict[R, Combine] = {
    R.SUM: lambda mine, got: mine.add_(got),
    R.PRODUCT: lambda mine, got: mine.mul_(got),
    R.MIN: lambda mine, got: torch.minimum(mine, got, out=mine),
    R.MAX: lambda mine, got: torch.maximum(mine, got, out=mine),
    # The bitwise ops are for integer (and bool) tensors, as in gloo.
    R.BAND: lambda mine, got: mine.bitwise_and_(got),
    R.BOR: lambda mine, got: mine.bitwise_or_(got),
    R.BXOR: lambda mine, got: mine.bitwise_xor_(got),
}

#: Ops computed as another op, then finished by the collective: AVG is a SUM whose
#: result is divided by the number of ranks at the end, as gloo does. Not in
#: :data:`COMBINE`, so code that cannot finish (a bare schedule run) refuses it.
FOLDS_AS: dict[R, R] = {R.AVG: R.SUM}

#: The ops by nccl-tests' names (``-o sum``): the benchmark's ``--op``.
BY_NAME: dict[str, R] = {
    "sum": R.SUM,
    "prod": R.PRODUCT,
    "min": R.MIN,
    "max": R.MAX,
    "avg": R.AVG,
}


def kind(op: dist.ReduceOp | R) -> R:
    """The op's ``RedOpType`` (a ``ReduceOp`` object carries it in ``.op``)."""
    return op.op if hasattr(op, "op") else op  # type: ignore[return-value]


def combine(op: dist.ReduceOp | R) -> Combine:
    """The function that folds a received piece in for ``op`` (AVG's is SUM's: see FOLDS_AS)."""
    k = kind(op)
    return COMBINE[FOLDS_AS.get(k, k)]
