"""The built-in collectives as real algorithms over point-to-point messages.

Each collective picks a schedule from :mod:`labsupport.schedules` (the same
data notebook 03 animates and :mod:`labsupport.costmodel` costs; which one is
:func:`labsupport.netem.plans.schedule_for`'s table) and runs it step by step
with :meth:`Comm.exchange`, which pays each message's link time. broadcast and
reduce use a binomial tree, all_to_all a pairwise exchange (p-1 steps), gather
and scatter one message per rank to or from the root, barrier a dissemination
barrier (ceil(log2 p) rounds of one byte).

**Time.** Every function takes ``at``, the emulated time the collective
starts, and returns the emulated time it ends on this rank. A step starts when
the previous one ended *plus the CPU time of its reductions* (measured as this
thread's CPU time, so waiting for a core shared with other ranks is not
counted), so the γ term is your CPU's own, while the emulator's bookkeeping (Python, gloo
over loopback, waking threads) is not charged as long as it is shorter than
the wire time. The caller sleeps until the returned time.

**Values** equal gloo's: integer results exactly; floating-point sums may
differ in the last bits, since the order of the additions is the algorithm's.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Protocol

import torch
import torch.distributed as dist

from labsupport import reduce_ops
from labsupport.netem.plans import schedule_for
from labsupport.runtime.emulator.state import STATE
from labsupport.schedules import Schedule, chunk_bounds

R = dist.ReduceOp.RedOpType
Messages = list[tuple[torch.Tensor, int]]


class Comm(Protocol):
    """What the algorithms need from a group: its size, this rank, and one step of messages."""

    def rank(self) -> int: ...  # noqa: D102

    def size(self) -> int: ...  # noqa: D102

    def node_size(self) -> int: ...  # noqa: D102

    def expect(self, recvs: Messages) -> list:
        """Post receives of (tensor, peer) now, for a later :meth:`exchange`."""

    def exchange(
        self, sends: Messages, recvs: Messages, at: float | None = None, posted: list | None = None
    ) -> float:
        """Send and receive (tensor, peer) messages starting at ``at``; when all are done."""


def op_type(op: dist.ReduceOp) -> R:
    """The ReduceOp's kind; a clear error for the ones gloo refuses too."""
    kind = reduce_ops.kind(op)
    if kind not in reduce_ops.COMBINE and kind not in reduce_ops.FOLDS_AS:  # AVG: SUM, then / p
        raise RuntimeError(f"Cannot use {op} with the netem backend (gloo does not support it).")
    return kind


def run_schedule(
    comm: Comm, schedule: Schedule, flat: torch.Tensor, op: R = R.SUM, at: float = 0.0
) -> float:
    """Run ``schedule`` on this rank's 1-D contiguous ``flat``, in place; return the end time."""
    me, combine = comm.rank(), reduce_ops.combine(op)
    bounds = chunk_bounds(flat.numel(), schedule.num_chunks)

    def part(chunks: range) -> torch.Tensor:
        return flat[bounds[chunks.start] : bounds[chunks.stop]]

    def landing(recvs: list) -> list:  # (chunks, src, reduce, buffer) of one step's receives
        return [
            (c, src, reduce, part(c) if direct else torch.empty_like(part(c)))
            for c, src, reduce, direct in recvs
            if part(c).numel()
        ]

    def expect(bufs: list) -> list:
        return comm.expect([(buf, src) for _, src, _, buf in bufs])

    plan = _plan(schedule, me)
    ahead = landing(plan[0][1]) if plan else []
    posted = expect(ahead)
    for k, (sends_, _) in enumerate(plan):
        here, mine = ahead, posted
        if k + 1 < len(plan):  # the next step's receives, posted now: its sends go out at once
            ahead = landing(plan[k + 1][1])
            posted = expect(ahead)
        sends = [(part(c), dst) for c, dst in sends_ if part(c).numel()]
        at = comm.exchange(sends, [], at, posted=mine)
        cpu = time.thread_time()
        for c, _, reduce, buf in here:
            if reduce:
                combine(part(c), buf)
            elif buf.data_ptr() != part(c).data_ptr():
                part(c).copy_(buf)
        spent = time.thread_time() - cpu  # the reduction's CPU time (this thread's): the γ term
        STATE.reduce_seconds += spent
        at += spent
    return at


@lru_cache(maxsize=1024)
def _plan(schedule: Schedule, me: int) -> list[tuple[list, list]]:
    """Rank ``me``'s part of each step: sends (chunks, dst), receives (chunks, src, reduce, direct).

    A receive is "direct" (lands in the buffer itself) when it overwrites chunks
    this rank is not sending in the same step.
    """
    plan = []
    for step in schedule.steps:
        mine = step.involving(me)
        sends = [(t.chunks, t.dst) for t in mine if t.src == me]
        sending = {c for t in sends for c in t[0]}
        recvs = [
            (t.chunks, t.src, t.reduce, not t.reduce and sending.isdisjoint(t.chunks))
            for t in mine
            if t.dst == me
        ]
        plan.append((sends, recvs))
    return plan


def _flat_in_place(tensor: torch.Tensor, fn) -> float:  # noqa: ANN001 - fn(flat) -> end time
    """Call ``fn`` on a flat contiguous view of ``tensor`` (a copy when it is not contiguous)."""
    if tensor.is_contiguous():
        return fn(tensor.view(-1))
    flat = tensor.contiguous().view(-1)
    end = fn(flat)
    tensor.copy_(flat.view_as(tensor))
    return end


def all_reduce(
    comm: Comm, tensor: torch.Tensor, op: dist.ReduceOp, algorithm: str, at: float
) -> float:
    """All-reduce ``tensor`` in place with ``algorithm``."""
    kind, p = op_type(op), comm.size()
    sched = schedule_for("all_reduce", algorithm, p, comm.node_size())
    end = _flat_in_place(tensor, lambda flat: run_schedule(comm, sched, flat, kind, at))
    if kind == R.AVG:
        tensor.div_(p)
    return end


def broadcast(comm: Comm, tensor: torch.Tensor, root: int, at: float) -> float:
    """Broadcast ``tensor`` from ``root`` down a binomial tree."""
    sched = schedule_for("broadcast", "tree", comm.size(), comm.node_size(), root)
    return _flat_in_place(tensor, lambda flat: run_schedule(comm, sched, flat, R.SUM, at))


def reduce(comm: Comm, tensor: torch.Tensor, root: int, op: dist.ReduceOp, at: float) -> float:
    """Reduce into ``root``'s ``tensor`` up a binomial tree; the others' tensors are unchanged."""
    kind, p = op_type(op), comm.size()
    sched = schedule_for("reduce", "tree", p, comm.node_size(), root)
    if comm.rank() != root:  # a non-root's buffer is scratch space: keep the caller's values
        return run_schedule(comm, sched, tensor.detach().clone().view(-1), kind, at)
    end = _flat_in_place(tensor, lambda flat: run_schedule(comm, sched, flat, kind, at))
    if kind == R.AVG:
        tensor.div_(p)
    return end


def all_gather(
    comm: Comm, output: torch.Tensor, input: torch.Tensor, algorithm: str, at: float
) -> float:
    """Gather every rank's ``input`` into ``output`` (p times as many elements), rank order."""
    p, me, n = comm.size(), comm.rank(), input.numel()
    flat = torch.empty(p * n, dtype=input.dtype, device=input.device)
    flat[me * n : (me + 1) * n].copy_(input.reshape(-1))
    end = run_schedule(
        comm, schedule_for("all_gather", algorithm, p, comm.node_size()), flat, at=at
    )
    output.copy_(flat.view_as(output))
    return end


def reduce_scatter(
    comm: Comm,
    output: torch.Tensor,
    input: torch.Tensor,
    op: dist.ReduceOp,
    algorithm: str,
    at: float,
) -> float:
    """Reduce ``input`` (p times ``output``'s size) over ranks; rank r keeps piece r."""
    kind, p, me, n = op_type(op), comm.size(), comm.rank(), output.numel()
    flat = input.detach().reshape(-1).clone()
    sched = schedule_for("reduce_scatter", algorithm, p, comm.node_size())
    end = run_schedule(comm, sched, flat, kind, at)
    output.copy_(flat[me * n : (me + 1) * n].view_as(output))
    if kind == R.AVG:
        output.div_(p)
    return end


def all_to_all(
    comm: Comm, outputs: list[torch.Tensor], inputs: list[torch.Tensor], at: float
) -> float:
    """Pairwise exchange: at step s, send piece (r+s) to rank r+s, receive from rank r-s."""
    p, me = comm.size(), comm.rank()
    outputs[me].copy_(inputs[me])
    for s in range(1, p):
        to, frm = (me + s) % p, (me - s) % p
        buf = outputs[frm] if outputs[frm].is_contiguous() else torch.empty_like(outputs[frm])
        at = comm.exchange([(inputs[to].contiguous(), to)], [(buf, frm)], at)
        if buf is not outputs[frm]:
            outputs[frm].copy_(buf)
    return at


def gather(
    comm: Comm, outputs: list[torch.Tensor], input: torch.Tensor, root: int, at: float
) -> float:
    """Every rank sends ``input`` to ``root``, which puts rank r's in ``outputs[r]``."""
    p, me = comm.size(), comm.rank()
    if me != root:
        return comm.exchange([(input.contiguous(), root)], [], at)
    bufs = [torch.empty_like(input) for _ in range(p)]
    end = comm.exchange([], [(bufs[r], r) for r in range(p) if r != root], at)
    for r in range(p):
        outputs[r].copy_(input if r == root else bufs[r])
    return end


def scatter(
    comm: Comm, output: torch.Tensor, inputs: list[torch.Tensor], root: int, at: float
) -> float:
    """``root`` sends ``inputs[r]`` to rank r."""
    p, me = comm.size(), comm.rank()
    if me == root:
        end = comm.exchange([(inputs[r].contiguous(), r) for r in range(p) if r != root], [], at)
        output.copy_(inputs[root])
        return end
    buf = torch.empty_like(output)
    end = comm.exchange([], [(buf, root)], at)
    output.copy_(buf)
    return end


def barrier(comm: Comm, at: float) -> float:
    """Nobody leaves before everybody has arrived: a dissemination barrier (as MPICH's).

    In round k = 1, 2, 4, ... every rank sends one byte to rank r+k and waits for
    one from rank r-k: after ceil(log2 p) rounds each rank has heard, directly
    or not, from every other, and all leave at the same emulated time.
    """
    p, me = comm.size(), comm.rank()
    token, got = torch.zeros(1, dtype=torch.uint8), torch.empty(1, dtype=torch.uint8)
    rounds = [1 << i for i in range((p - 1).bit_length())]
    posted = [comm.expect([(got, (me - k) % p)]) for k in rounds]  # every receive first
    for k, mine in zip(rounds, posted, strict=True):
        at = comm.exchange([(token, (me + k) % p)], [], at, posted=mine)
    return at
