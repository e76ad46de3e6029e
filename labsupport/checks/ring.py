"""Grader for notebook 03: your ring all-reduce, against ``dist.all_reduce``.

:func:`check_ring_allreduce` runs your ``ring_allreduce(tensor)`` on several world
sizes and tensor lengths (including lengths that p does not divide, and lengths
smaller than p, where some chunks are empty), on random float32 values (compared
with a tolerance: the order of the additions differs) and on int64 values
(compared exactly). It then checks the traffic: a ring all-reduce sends each
rank 2(p-1) chunks, about 2(p-1)/p·n elements, and no more.

It fails, with a message that says where and a hint, the usual mistakes: a
ring where every rank receives before it sends (it hangs; the ranks are
restarted after ``timeout``), one that forwards the whole buffer (wrong sums,
or right sums with p/2 times too much traffic), and an all-gather phase that
adds instead of copying (wrong sums).

Traffic is counted by wrapping ``ProcessGroup.send`` (what ``dist.send``,
``dist.isend`` and ``dist.batch_isend_irecv`` call) while your function runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from labsupport.check import (
    FAIL,
    PASS,
    CheckResult,
    describe_difference,
    explain_failure,
    report,
)

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

    def send(self, tensors, *args, **kwargs):  # noqa: ANN001, ANN202 - ProcessGroup.send's own
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
    """On every rank: (n, dtype, expected, got, elements sent) for each length and dtype."""
    import torch.distributed as dist

    from labsupport.launch import rank_device

    device, rank = rank_device(), dist.get_rank()
    out = []
    for n in lengths:
        for dtype in (torch.float32, torch.int64):
            x = _inputs(n, dtype, rank).to(device)
            expected = x.clone()
            dist.all_reduce(expected)
            dist.barrier()
            mine = x.clone()
            with counting_sends() as sent:
                result = fn(mine)
            got = mine if result is None else result
            kind = str(dtype).removeprefix("torch.")
            out.append((n, kind, expected.cpu(), got.detach().cpu(), sent[0]))
    return out


# Advice for the typical ring mistakes, added to the failure message.
_HINTS = {
    "IndexError": (
        "\n   Hint: Tensor.chunk(p) can give fewer than p chunks (5 elements in 4 chunks gives "
        "3); tensor_split(p) always gives p."
    ),
    "timeout": (
        " If every rank receives before it sends, nobody ever sends: post the send first "
        "(isend) or use batch_isend_irecv."
    ),
}


@contextlib.contextmanager
def _run_on(cluster: Any, p: int) -> Iterator[Any]:
    """``cluster`` if it has p ranks, else the running one if it fits, else a temporary one."""
    if cluster is not None and cluster.world_size == p:
        yield cluster
        return
    from labsupport.check import cluster_for_check

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
    """Check ``fn(tensor)`` (sums ``tensor`` over all ranks, in place or returned) on each size.

    ``cluster`` is used for the world size it has; other sizes get the running
    cluster if it fits, else a temporary one (a few seconds to start).
    """
    from labsupport.launch import CollectiveTimeout, RankError

    for p in world_sizes:
        lengths = lengths_for(p)
        try:
            with _run_on(cluster, p) as running:
                per_rank = running.call(_trials, (fn, lengths), timeout=timeout)
        except (RankError, CollectiveTimeout) as err:
            context = f" (of {p} ranks, tensor lengths {lengths})"
            return explain_failure(err, name, timeout, context=context, hints=_HINTS)
        verdict = _judge(per_rank, p, name)
        if verdict is not None:
            return verdict
    sizes = ", ".join(map(str, world_sizes))
    return report(
        True,
        f"{PASS} {name} matches dist.all_reduce on {sizes} ranks, on float32 and int64 tensors "
        f"of several lengths, and sends no more than a ring should.",
    )


def _judge(per_rank: list[list[tuple]], p: int, name: str) -> CheckResult | None:
    """The first wrong sum or excess traffic, as a failed CheckResult; None if all is well."""
    for case in range(len(per_rank[0])):
        for rank, trials in enumerate(per_rank):
            n, dtype, expected, got, _ = trials[case]
            difference = describe_difference(expected, got, rtol=1e-5, atol=1e-4)
            if difference:
                return report(
                    False,
                    f"{FAIL} {name} with {p} ranks on a {n}-element {dtype} tensor, "
                    f"rank {rank}: {difference}.\n   Hints: sums too large mean something is "
                    "added twice (the all-gather phase must copy, not add; send one chunk, "
                    "not the whole buffer). Wrong only when p does not divide n? Cut the "
                    "tensor with tensor_split, which always gives p chunks.",
                )
    for rank, trials in enumerate(per_rank):
        for n, _, _, _, sent in trials:
            most = 2 * (p - 1) * -(-n // p)  # 2(p-1) chunks of at most ceil(n/p) elements
            if p > 1 and n >= p and sent == 0:
                return report(
                    False,
                    f"{FAIL} {name} gives the right sums but rank {rank} sent nothing with "
                    "send/isend: this exercise asks you to build the ring from point-to-point "
                    "calls, not to call a collective.",
                )
            if sent > most:
                return report(
                    False,
                    f"{FAIL} {name} gives the right sums, but with {p} ranks and {n} elements "
                    f"rank {rank} sent {sent} elements; a ring all-reduce sends 2(p-1) chunks, "
                    f"at most {most}. Are you forwarding the whole buffer instead of one chunk?",
                )
    return None
