"""Grader for notebook 03: your ring all-reduce, against ``dist.all_reduce``.

:func:`check_ring_allreduce` runs your ``ring_allreduce(tensor)`` on several world
sizes and tensor lengths (including lengths that p does not divide, and lengths
smaller than p, where some chunks are empty), on random float32 values (compared
with a tolerance: the order of the additions differs) and on int64 values
(compared exactly), and last on all-ones int64 tensors, where every element of
the answer is p: an element above p counted a contribution twice, one below p
lost one, and the message says which it saw. The sums must be written into the
argument (in place, like ``dist.all_reduce``). It then checks the traffic: a
ring all-reduce sends each rank 2(p-1) chunks, about 2(p-1)/p·n elements, and
no more.

It fails, with a message that says where and a hint, the usual mistakes: a
ring where every rank receives before it sends (it hangs; the ranks are
restarted after ``timeout``; the message gives one line per rank), one that
forwards the whole buffer (wrong sums, or right sums with p/2 times too much
traffic), an all-gather phase that adds instead of copying (wrong sums), and a
result returned in a new tensor instead of written in place.

Traffic is counted by wrapping ``ProcessGroup.send`` (what ``dist.send``,
``dist.isend`` and ``dist.batch_isend_irecv`` call) while your function runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from labsupport.runtime.check import (
    FAIL,
    PASS,
    CheckResult,
    describe_difference,
    explain_failure,
    report,
)
from labsupport.runtime.language import N_, _
from labsupport.runtime.launch.frames import user_frame, where

DEFAULT_WORLD_SIZES = (3, 4)


def lengths_for(p: int) -> list[int]:
    """Tensor lengths tried on p ranks: tiny, not divisible by p, and a larger one."""
    return sorted({1, max(1, p - 1), p, 2 * p + 1, 1000})


@contextlib.contextmanager
def counting_sends() -> Iterator[list[int]]:
    """Count the elements this process sends point-to-point inside the ``with`` block."""
    from torch._C._distributed_c10d import ProcessGroup

    # Keep the class's own entry (a method descriptor) to put back exactly; reading
    # ProcessGroup.send gives an unbound function, which would not bind `self` if
    # it were assigned back.
    entry = vars(ProcessGroup)["send"]
    original = ProcessGroup.send
    sent = [0]

    def send(self: ProcessGroup, tensors: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
        sent[0] += sum(t.numel() for t in tensors)
        return original(self, tensors, *args, **kwargs)

    ProcessGroup.send = send
    try:
        yield sent
    finally:
        ProcessGroup.send = entry


def _inputs(n: int, dtype: torch.dtype, rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1009 * n + rank)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g, dtype=dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def _trials(fn: Callable, lengths: Sequence[int]) -> list[tuple]:
    """On every rank: (n, dtype, expected, tensor after, returned, elements sent) per case.

    The last case is the diagnostic one: every rank holds ones (int64, 2p + 1
    elements), so each element of the answer is p, and an element above or
    below p says at once whether a contribution was counted twice or lost.
    """
    import torch.distributed as dist

    from labsupport.runtime.launch import rank_device

    device, rank, p = rank_device(), dist.get_rank(), dist.get_world_size()
    cases = [(n, dtype) for n in lengths for dtype in (torch.float32, torch.int64)]
    out = []
    for n, dtype in [*cases, (2 * p + 1, ONES)]:
        if dtype is ONES:
            x = torch.ones(n, dtype=torch.int64, device=device)
        else:
            x = _inputs(n, dtype, rank).to(device)
        expected = x.clone()
        dist.all_reduce(expected)
        dist.barrier()
        mine = x.clone()
        with counting_sends() as sent:
            result = fn(mine)
        returned = result.detach().cpu() if isinstance(result, torch.Tensor) else None
        kind = "ones" if dtype is ONES else str(dtype).removeprefix("torch.")
        out.append((n, kind, expected.cpu(), mine.detach().cpu(), returned, sent[0]))
    return out


ONES = object()  # marks the diagnostic all-ones case in _trials


# Advice for the typical ring mistakes, added to the failure message (translated there).
_HINTS = {
    "IndexError": N_(
        "Hint: Tensor.chunk(p) can give fewer than p chunks (5 elements in 4 chunks gives "
        "3); tensor_split(p) always gives p."
    ),
}


def _user_line(stack: str) -> tuple[str, str]:
    """(where, the call it waits in) for the innermost frame of the learner's own code."""
    found = user_frame(stack)
    if found is None:
        return _("(no stack)"), ""
    # translators: added after a line of code; {} is the call it waits in (recv, wait...)
    waiting = _(" (waiting in {})")
    return where(stack, code="{}", waiting=waiting), found[1].name


def deadlock_message(name: str, timeout: float, stacks: dict[int, str], context: str) -> str:
    """A hang, most useful first: the diagnosis, then one line per rank, then the fix."""
    lines = {rank: _user_line(stack) for rank, stack in sorted(stacks.items())}
    receiving = [r for r, (where, inner) in lines.items() if "recv" in where + inner]
    head = f"{FAIL} " + _(
        "{name} did not finish within {seconds:g} s{context}: a deadlock."
    ).format(name=name, seconds=timeout, context=context)
    if stacks and len(receiving) == len(stacks):
        head += "\n   " + _("Every rank is blocked in a receive, so no rank ever gets to its send:")
    else:
        head += "\n   " + _("Where each rank was waiting:")
    body = [
        # translators: {where} is the line of the learner's code the rank waits in
        "   " + _("rank {rank}: {where}").format(rank=r, where=at)
        for r, (at, _call) in lines.items()
    ]
    fix = (
        "   "
        + _(
            "Fix: post each step's send and receive together (batch_isend_irecv, or isend "
            "before recv), then wait for both."
        )
        + "\n   "
        + _("(The ranks were restarted.)")
    )
    return "\n".join([head, *body, fix])


@contextlib.contextmanager
def _run_on(cluster: Any, p: int) -> Iterator[Any]:
    """``cluster`` if it has p ranks, else the running one if it fits, else a temporary one."""
    if cluster is not None and cluster.world_size == p:
        yield cluster
        return
    from labsupport.runtime.check import cluster_for_check

    with cluster_for_check(None, p) as running:
        yield running


def check_ring_allreduce(
    fn: Callable[[torch.Tensor], Any],
    cluster: Any = None,
    *,
    world_sizes: Sequence[int] = DEFAULT_WORLD_SIZES,
    timeout: float = 20.0,
    name: str = "ring_allreduce",
) -> CheckResult:
    """Check ``fn(tensor)`` (sums ``tensor`` over all ranks *in place*) on each world size.

    ``cluster`` is used for the world size it has; other sizes get the running
    cluster if it fits, else a temporary one (a few seconds to start).
    """
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    for p in world_sizes:
        lengths = lengths_for(p)
        # translators: added after the exercise's name in a sentence (e.g. "… raised
        # IndexError on rank 1 (on 3 ranks, tensor lengths [1, 2, 3, 7, 1000]): …")
        context = _(" (on {p} ranks, tensor lengths {lengths})").format(p=p, lengths=lengths)
        try:
            with _run_on(cluster, p) as running:
                per_rank = running.call(_trials, (fn, lengths), timeout=timeout)
        except CollectiveTimeout as err:
            return report(False, deadlock_message(name, err.timeout, err.stacks, context))
        except RankError as err:
            hints = {error: _(hint) for error, hint in _HINTS.items()}
            return explain_failure(err, name, timeout, context=context, hints=hints)
        verdict = _judge(per_rank, p, name)
        if verdict is not None:
            return verdict
    sizes = ", ".join(map(str, world_sizes))
    return report(
        True,
        f"{PASS} "
        + _(
            "{name} sums in place like dist.all_reduce on {sizes} ranks, on float32 and "
            "int64 tensors of several lengths, and sends no more than a ring should."
        ).format(name=name, sizes=sizes),
    )


def _evidence(per_rank: list[list[tuple]], p: int) -> str:
    """What the all-ones case shows, and the hint that fits it (empty if it came out right)."""
    for rank, trials in enumerate(per_rank):
        after = trials[-1][3]
        values = after.tolist()
        if all(v == p for v in values):
            continue
        if max(values) > p:
            evidence = _(
                "Evidence: with ones on every rank (the sum is {p} everywhere), rank {rank} "
                "ends with {values}: elements above {p} counted a contribution twice."
            )
            hint = _(
                "Hint: the all-gather phase must copy, not add; send one chunk per step, "
                "not the whole buffer."
            )
        else:
            evidence = _(
                "Evidence: with ones on every rank (the sum is {p} everywhere), rank {rank} "
                "ends with {values}: elements below {p} lost a contribution."
            )
            hint = _(
                "Hint: check which chunk you send and which you receive at each step, and that "
                "you add (phase 1) into the chunk you received."
            )
        return "\n   " + evidence.format(p=p, rank=rank, values=values) + "\n   " + hint
    return ""


def _judge(per_rank: list[list[tuple]], p: int, name: str) -> CheckResult | None:
    """The first wrong sum, a result not in place, or excess traffic; None if all is well."""
    evidence = _evidence(per_rank, p)
    for case in range(len(per_rank[0])):
        for rank, trials in enumerate(per_rank):
            n, dtype, expected, after, returned = trials[case][:5]
            if describe_difference(expected, after, rtol=1e-5, atol=1e-4) is None:
                continue
            if returned is not None and describe_difference(expected, returned) is None:
                return report(
                    False,
                    f"{FAIL} "
                    + _(
                        "{name} returns the right sums in a new tensor, but leaves its "
                        "argument unchanged (rank {rank}, {p} ranks, {n} elements)."
                    ).format(name=name, rank=rank, p=p, n=n)
                    + "\n   "
                    + _(
                        "Hint: the exercise asks for an in-place all-reduce, like "
                        "dist.all_reduce: write the sums into `tensor` (e.g. into the views "
                        "tensor_split gives, or tensor.copy_(...) at the end)."
                    ),
                )
            difference = describe_difference(expected, after, rtol=1e-5, atol=1e-4)
            if dtype == "ones":
                wrong = _(
                    "{name} gives wrong sums with {p} ranks (first seen on rank {rank}, "
                    "a {n}-element int64 tensor of ones)."
                )
            else:
                wrong = _(
                    "{name} gives wrong sums with {p} ranks (first seen on rank {rank}, "
                    "a {n}-element {dtype} tensor)."
                )
            hint = evidence or "\n   " + _(
                "Hint: right on the all-ones test but not here: wrong only when p does not "
                "divide n? Cut the tensor with tensor_split, which always gives p chunks."
            )
            return report(
                False,
                f"{FAIL} "
                + wrong.format(name=name, p=p, rank=rank, n=n, dtype=dtype)
                + hint
                + "\n   "
                + _("Detail: {difference}.").format(difference=difference),
            )
    for rank, trials in enumerate(per_rank):
        for trial in trials:
            n, sent = trial[0], trial[5]
            most = 2 * (p - 1) * -(-n // p)  # 2(p-1) chunks of at most ceil(n/p) elements
            if p > 1 and n >= p and sent == 0:
                return report(
                    False,
                    f"{FAIL} "
                    + _(
                        "{name} gives the right sums but rank {rank} sent nothing with send/isend."
                    ).format(name=name, rank=rank)
                    + "\n   "
                    + _(
                        "This exercise asks you to build the ring from "
                        "point-to-point calls, not to call a collective."
                    ),
                )
            if sent > most:
                return report(
                    False,
                    f"{FAIL} "
                    + _(
                        "{name} gives the right sums, but with {p} ranks and {n} elements "
                        "rank {rank} sent {sent} elements."
                    ).format(name=name, p=p, n=n, rank=rank, sent=sent)
                    + "\n   "
                    + _(
                        "A ring all-reduce sends 2(p-1) chunks, at most {most} elements. "
                        "Are you forwarding the whole buffer instead of one chunk?"
                    ).format(most=most),
                )
    return None
