"""Running a schedule on a real process group, with point-to-point messages."""

from __future__ import annotations

import torch
import torch.distributed as dist

from labsupport.reduce_ops import COMBINE
from labsupport.schedules.model import Schedule, ScheduleError, chunk_bounds


def execute(
    schedule: Schedule,
    tensor: torch.Tensor,
    op: dist.ReduceOp = dist.ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Run ``schedule`` on this rank's ``tensor``, in place; every rank of ``group`` calls it.

    The tensor (contiguous, any shape and length) is cut into
    ``schedule.num_chunks`` chunks as :func:`chunk_bounds` says. Each step posts
    all of this rank's sends and receives at once (``dist.batch_isend_irecv``),
    waits for them, then adds in or copies what arrived. Empty chunks are not
    sent at all: both ends know their size.

    On return the tensor holds what the collective promises: the reduction
    everywhere for all_reduce, on the root for reduce, chunk r on rank r for
    reduce_scatter; the other chunks hold partial results. ``op`` is one of
    :data:`labsupport.reduce_ops.COMBINE`'s (SUM, PRODUCT, MIN, MAX, and the bitwise ops).
    Run here on gloo only; with NCCL, note that the first
    ``batch_isend_irecv`` of a group must involve every rank of it.
    """
    p, me = dist.get_world_size(group), dist.get_rank(group)
    if p != schedule.world_size:
        raise ScheduleError(f"{schedule.name} is built for {schedule.world_size} ranks, not {p}")
    if not tensor.is_contiguous():
        raise ValueError("execute needs a contiguous tensor (call .contiguous() first)")
    if op not in COMBINE:  # AVG is not: it needs a division at the end (reduce_ops.FOLDS_AS)
        names = ", ".join(o.name for o in COMBINE)
        raise ValueError(f"execute supports {names}, not {op}")
    flat = tensor.view(-1)
    bounds = chunk_bounds(flat.numel(), schedule.num_chunks)

    def part(chunks: range) -> torch.Tensor:  # a view of the chunks, no copy
        return flat[bounds[chunks.start] : bounds[chunks.stop]]

    def global_rank(r: int) -> int:
        return r if group is None else dist.get_global_rank(group, r)

    for step in schedule.steps:
        mine = step.involving(me)
        sends = [t for t in mine if t.src == me]
        recvs = [t for t in mine if t.dst == me and part(t.chunks).numel() > 0]
        sending = {c for t in sends for c in t.chunks}
        ops = [
            dist.P2POp(dist.isend, part(t.chunks), global_rank(t.dst), group)
            for t in sends
            if part(t.chunks).numel() > 0
        ]
        landing = []  # (transfer, buffer): receives land in the tensor itself or in a buffer
        for t in recvs:
            direct = not t.reduce and sending.isdisjoint(t.chunks)
            buf = part(t.chunks) if direct else torch.empty_like(part(t.chunks))
            landing.append((t, buf, direct))
            ops.append(dist.P2POp(dist.irecv, buf, global_rank(t.src), group))
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        for t, buf, direct in landing:
            if t.reduce:
                COMBINE[op](part(t.chunks), buf)
            elif not direct:
                part(t.chunks).copy_(buf)
    return tensor
