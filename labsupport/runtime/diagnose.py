"""Reading a failure on N ranks: one line per rank instead of pages of text.

Two things a learner reads again and again in notebook 09:

* where each rank is blocked, from the stacks a ``CollectiveTimeout``
  (or a :class:`~labsupport.runtime.launch.RankError`) carries: :func:`where_blocked`;
* what differs between ranks in a ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` mismatch error
  ("Detected mismatch between collectives on ranks ... differ in the following
  aspects: ..."), which puts the key fact at the very end of a long message, in
  words run together ("Op type: ALLREDUCEvs REDUCE"): :func:`mismatch_aspects`
  and :func:`detail_summary` give it as ``op type ALLREDUCE vs REDUCE``.

:func:`four_mismatches` runs the four ways a collective can mismatch (shape, dtype,
order, op) on the ranks of a group started with DETAIL; notebook 09 and its deck
both run it.

::

    err = sys.last_value             # the error the failing cell raised
    print_where_blocked(err)         # rank 0: line 3 `dist.all_reduce(x)`, waiting in all_reduce
"""

from __future__ import annotations

import re
from typing import Any

from labsupport.runtime.launch import frames

_ASPECTS = re.compile(r"differ in the following aspects:\s*(.*)", re.S)
#: torch's names of the aspects (c10d's ``CollectiveFingerPrint``), and ours.
_LABELS = {
    "Op type": "op type",
    "Tensor Tensor shapes": "shapes",
    "Tensor Tensor dtypes": "dtypes",
    "Tensor Tensor devices": "devices",
}
_LABEL = re.compile("(" + "|".join(map(re.escape, _LABELS)) + "): ")
#: ``TensorOptions(dtype=float (default), device=cpu, ..., memory_format=(nullopt))``.
_DEVICE = re.compile(r"TensorOptions\((?:[^()]|\([^()]*\))*?device=(\w+)(?:[^()]|\([^()]*\))*\)")


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


def detail_summary(message: str) -> str | None:
    """What a DETAIL mismatch message says differs, readably; None if it is not one.

    ``... differ in the following aspects: Tensor Tensor shapes: 2vs 3`` gives
    ``shapes 2 vs 3``; a side with nothing to show (the other side's fingerprint may
    carry no tensor) reads ``(none)``; a device ``TensorOptions(... device=cpu ...)``
    reads ``cpu``. Aspects are joined with ``; ``.
    """
    aspects = _ASPECTS.search(message)
    if "Detected mismatch between collectives" not in message or aspects is None:
        return None
    text = " ".join(aspects.group(1).split())
    parts = _LABEL.split(text)[1:]  # [label, value, label, value, ...]
    out = []
    for label, value in zip(parts[::2], parts[1::2], strict=True):
        value = _DEVICE.sub(r"\1", value.strip())
        mine, _, theirs = value.partition("vs")
        out.append(f"{_LABELS[label]} {mine.strip() or '(none)'} vs {theirs.strip() or '(none)'}")
    return "; ".join(out) or text


def mismatch_aspects(err: Any, limit: int = 120) -> dict[int, str]:
    """Rank -> what DETAIL says differs (:func:`detail_summary`), e.g. ``shapes 2 vs 3``.

    ``err`` is a :class:`~labsupport.runtime.launch.RankError`; ranks whose error is not a
    DETAIL mismatch are left out. Each line is cut to ``limit`` characters.
    """
    found = {}
    for rank, error in sorted(getattr(err, "errors", {}).items()):
        text = detail_summary(error.message)
        if text is not None:
            found[rank] = text if len(text) <= limit else text[: limit - 1] + "…"
    return found


def four_mismatches(rank: int, device: Any) -> dict[str, str]:
    """On every rank of a group started with DETAIL: the four ways a collective can mismatch.

    Each case is caught here (``try``/``except``), so the group goes on to the next;
    returns, per case, what DETAIL said (:func:`detail_summary`) or the result.
    """
    import torch
    import torch.distributed as dist

    def shape() -> None:  # rank 0 has 2 elements, the others 3
        dist.all_reduce(torch.ones(2 if rank == 0 else 3, device=device))

    def dtype() -> None:  # rank 1 reduces float64, the others float32
        kind = torch.float64 if rank == 1 else torch.float32
        dist.all_reduce(torch.ones(3, device=device, dtype=kind))

    def order() -> None:  # rank 0 broadcasts first, the others all-reduce first
        a, b = torch.ones(3, device=device), torch.zeros(3, device=device)
        calls = [lambda: dist.broadcast(b, src=0), lambda: dist.all_reduce(a)]
        for call in calls if rank == 0 else calls[::-1]:
            call()

    def op() -> str:  # rank 2 asks for MAX, the others for SUM
        x = torch.ones(3, device=device) * (rank + 1)
        dist.all_reduce(x, op=dist.ReduceOp.MAX if rank == 2 else dist.ReduceOp.SUM)
        return f"no error; result {x.tolist()} (SUM would be 10, MAX 4)"

    results = {}
    for case in (shape, dtype, order, op):
        try:
            results[case.__name__] = case() or "no error"
        except RuntimeError as err:
            results[case.__name__] = "DETAIL: " + (detail_summary(str(err)) or str(err))
    return results
