"""Graders for notebook 04: recursive doubling on point-to-point, and a crossover size.

:func:`check_recursive_doubling` runs your ``recursive_doubling_allreduce(tensor)``
on every rank of 2, 4 and 8 ranks (so a hard-coded number of steps fails), on
float32 and int64 tensors of several lengths, against ``dist.all_reduce``, and
counts the bytes each rank sends: a recursive doubling all-reduce sends its whole
buffer lg p times, which is what :func:`labsupport.costmodel.cost` counts for the
shipped schedule, and no more. The exercise needs no fold: world sizes that are
not a power of two (p = 6: ranks 2 and 3 have no partner 4 away) need MPICH's
fold, which :func:`labsupport.schedules.recursive_doubling_all_reduce` shows.
Point-to-point sends are counted on a plain gloo group (``ProcessGroup.send``)
and on an emulated one (``labsupport.runtime.emulator.traffic``); a collective sends none.

:func:`check_crossover` compares your ``crossover(p, alpha, beta)`` with the size
where :mod:`labsupport.costmodel`'s Rabenseifner cost drops below its recursive
doubling cost (``math.inf`` when it never does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from labsupport import costmodel
from labsupport.runtime.check import (
    FAIL,
    PASS,
    CheckResult,
    check_function,
    cluster_for_check,
    describe_difference,
    explain_failure,
    report,
)
from labsupport.runtime.language import _
from labsupport.schedules import recursive_doubling_all_reduce

LENGTHS = (1, 5, 64, 1000)


def _trials(fn: Callable, lengths: Sequence[int]) -> list[tuple]:
    """On every rank: (n, dtype, expected, got, bytes sent) for each length and dtype."""
    import torch.distributed as dist

    from labsupport.runtime.check.ring import counting_sends
    from labsupport.runtime.emulator import traffic
    from labsupport.runtime.launch import rank_device

    device, rank = rank_device(), dist.get_rank()
    out = []
    for n in lengths:
        for dtype in (torch.float32, torch.int64):
            g = torch.Generator().manual_seed(97 * n + rank)
            x = torch.randint(-100, 100, (n,), generator=g).to(dtype).to(device)
            expected = x.clone()
            dist.all_reduce(expected)
            dist.barrier()
            mine = x.clone()
            before = traffic()["p2p_bytes_sent"]
            with counting_sends() as elements:
                result = fn(mine)
            sent = elements[0] * x.element_size() + traffic()["p2p_bytes_sent"] - before
            got = mine if result is None else result
            out.append((n, str(dtype).removeprefix("torch."), expected.cpu(), got.cpu(), sent))
    return out


def model_bytes(p: int, nbytes: int) -> float:
    """Bytes each rank sends in the shipped recursive doubling schedule (the cost model's count)."""
    return float(costmodel.cost(recursive_doubling_all_reduce(p), nbytes).sent_per_rank.max())


def check_recursive_doubling(
    fn: Callable[[torch.Tensor], Any],
    cluster: Any = None,
    *,
    world_sizes: Sequence[int] = (2, 4, 8),
    timeout: float = 30.0,
    name: str = "recursive_doubling_allreduce",
) -> CheckResult:
    """Check ``fn(tensor)`` (sums ``tensor`` over all ranks) on power-of-two world sizes.

    ``cluster`` is used for the world size it has (that size is tried first);
    the others get a temporary cluster of that size (a few seconds each to start), the
    larger ones first.
    """
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    if any(p < 1 or p & (p - 1) for p in world_sizes):
        raise ValueError(f"world_sizes must be powers of two, got {tuple(world_sizes)}")
    first = cluster.world_size if cluster is not None else None
    # the cluster's size first, then the larger ones: a step count hard-coded for the first
    # size gives wrong sums there at once, where on fewer ranks it would wait on absent ones
    for p in sorted(world_sizes, key=lambda q: (q != first, -q)):
        try:
            fits = cluster if cluster is not None and cluster.world_size == p else None
            with cluster_for_check(fits, p) as running:
                per_rank = running.call(_trials, (fn, LENGTHS), timeout=timeout)
        except (RankError, CollectiveTimeout) as err:
            # translators: follows "on rank 3" or "within 30 s" in a FAIL line (mind the space)
            of_p = _(" (of {p} ranks)").format(p=p)
            return explain_failure(err, name, timeout, context=of_p)
        verdict = _judge(per_rank, p, name)
        if verdict is not None:
            return verdict
    matches = _(
        "{name} matches dist.all_reduce on {sizes} ranks, and each rank sends lg p whole "
        "buffers, as the cost model counts. (For p = 6, 12, ... the extra ranks must be "
        "folded in first: see schedules.recursive_doubling_all_reduce.)"
    ).format(name=name, sizes=", ".join(map(str, world_sizes)))
    return report(True, f"{PASS} {matches}")


def _judge(per_rank: list[list[tuple]], p: int, name: str) -> CheckResult | None:
    """The first wrong value or wrong traffic, as a failed CheckResult; None if all is well."""
    for rank, trials in enumerate(per_rank):
        for n, dtype, expected, got, sent in trials:
            difference = describe_difference(expected, got, rtol=1e-5, atol=1e-4)
            if difference:
                wrong = _(
                    "{name} with {p} ranks on a {n}-element {dtype} tensor, rank {rank}: "
                    "{difference}."
                ).format(name=name, p=p, n=n, dtype=dtype, rank=rank, difference=difference)
                hint = _(
                    "Hint: at step k your partner is rank ^ (1 << k), for k = 0 .. lg p - 1 (as "
                    "many steps as the world size needs); receive into a fresh buffer, and add "
                    "it only after the exchange has finished."
                )
                return report(False, f"{FAIL} {wrong}\n   {hint}")
            nbytes = n * expected.element_size()
            want = model_bytes(p, nbytes)
            if p > 1 and sent == 0:
                nothing = _(
                    "{name} gives the right sums but rank {rank} sent nothing with send/isend: "
                    "build it from point-to-point calls, not from a collective."
                ).format(name=name, rank=rank)
                return report(False, f"{FAIL} {nothing}")
            if sent > want:
                too_much = _(
                    "{name} gives the right sums, but with {p} ranks rank {rank} sent {sent} "
                    "bytes of a {nbytes}-byte buffer; recursive doubling sends lg p = {steps} "
                    "whole buffers ({want:.0f} bytes)."
                ).format(
                    name=name, p=p, rank=rank, sent=sent, nbytes=nbytes,
                    steps=int(math.log2(p)), want=want,
                )  # fmt: skip
                return report(False, f"{FAIL} {too_much}")
    return None


def crossover_reference(p: int, alpha: float, beta: float) -> float:
    """The size (bytes) above which Rabenseifner beats recursive doubling, from costmodel.

    Both costs are linear in n: RD(n) - Rab(n) = a + b·n, so they cross at -a/b
    when b > 0 (Rabenseifner's β term grows more slowly); otherwise never.
    """
    rd, rab = costmodel.recursive_doubling_all_reduce_time, costmodel.rabenseifner_all_reduce_time
    a = rd(0.0, p, alpha, 0.0) - rab(0.0, p, alpha, 0.0)  # latency terms
    b = rd(1.0, p, 0.0, beta) - rab(1.0, p, 0.0, beta)  # bandwidth terms, per byte
    return -a / b if b > 0 else math.inf


CROSSOVER_CASES = [
    (4, 1e-3, 1 / 50e6),
    (8, 1e-3, 1 / 50e6),
    (64, 5e-6, 1 / 25e9),
    (1024, 2e-6, 1 / 200e9),
    (2, 1e-3, 1 / 50e6),
]


def check_crossover(fn: Callable[[int, float, float], float]) -> CheckResult:
    """Check ``fn(p, alpha, beta)``: bytes where Rabenseifner overtakes recursive doubling."""

    # check.describe_difference does not treat inf == inf as equal: compare "never" instead.
    def never(f: Callable) -> Callable:
        def call(*case: Any) -> Any:
            value = f(*case)
            # translators: the answer when the costs never cross, shown as a value (in quotes)
            return _("never (math.inf)") if value == math.inf else value

        return call

    result = check_function(
        never(fn), never(crossover_reference), CROSSOVER_CASES, name="crossover", rtol=1e-6
    )
    if not result and result.implemented:
        hint = _(
            "Hint: write both costs as a + b·n, subtract, and solve for n. With p = 2 the two "
            "algorithms move the same bytes: return math.inf when they never cross."
        )
        print("   " + hint)
    return result
