"""Reading a failure on N ranks: one line per rank instead of pages of text.

Two things a learner reads again and again in notebook 09:

* where each rank is blocked, from the stacks a :class:`~labsupport.launch.CollectiveTimeout`
  (or a :class:`~labsupport.launch.RankError`) carries: :func:`where_blocked`;
* what differs between ranks in a ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` mismatch error
  ("Detected mismatch between collectives on ranks ... differ in the following
  aspects: ..."), which puts the key fact at the very end of a long message:
  :func:`mismatch_aspects`.

::

    err = sys.last_value             # the error the failing cell raised
    print_where_blocked(err)         # rank 0: line 3 `dist.all_reduce(x)`, waiting in all_reduce
"""

from __future__ import annotations

import re
from typing import Any

from labsupport.launch import frames

_ASPECTS = re.compile(r"differ in the following aspects:\s*(.*)", re.S)


def where(stack: str) -> str:
    """The innermost line of *your* code in one stack, and the call it waits in."""
    return frames.where(stack, function=False)


def where_blocked(err: Any, world_size: int | None = None) -> dict[int, str]:
    """Rank -> where it was blocked, for every rank of the error's stacks.

    With ``world_size``, the ranks that are *not* in the stacks are listed too, as
    "finished (not blocked)": in a hang, the rank that is missing is often the culprit.
    """
    stacks = dict(getattr(err, "stacks", {}) or {})
    lines = {rank: where(stack) for rank, stack in sorted(stacks.items())}
    for rank in range(world_size or 0):
        lines.setdefault(rank, "finished the cell (not blocked)")
    return dict(sorted(lines.items()))


def print_where_blocked(err: Any, world_size: int | None = None) -> None:
    """Print :func:`where_blocked`, one line per rank."""
    for rank, text in where_blocked(err, world_size).items():
        print(f"rank {rank}: {text}")


def mismatch_aspects(err: Any, limit: int = 120) -> dict[int, str]:
    """Rank -> what DETAIL says differs, e.g. ``Tensor Tensor shapes: 2vs 3`` (its words).

    ``err`` is a :class:`~labsupport.launch.RankError`; ranks whose error is not a
    DETAIL mismatch are left out. Each line is cut to ``limit`` characters.
    """
    found = {}
    for rank, error in sorted(getattr(err, "errors", {}).items()):
        message = error.message
        aspects = _ASPECTS.search(message)
        if "Detected mismatch between collectives" not in message or aspects is None:
            continue
        text = " ".join(aspects.group(1).split())
        found[rank] = text if len(text) <= limit else text[: limit - 1] + "…"
    return found
