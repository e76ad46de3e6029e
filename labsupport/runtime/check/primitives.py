"""Graders for notebooks 01 (collective primitives) and 02 (point-to-point, groups).

Each ``check_*`` takes your function, runs it (on every rank of the running cluster
where it is distributed code) next to a reference, prints what it found and returns
a :class:`~labsupport.runtime.check.CheckResult`. The references live here, so reading this
file gives the answers away: try first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from labsupport.runtime.check import (
    CheckResult,
    check_function,
    check_on_ranks,
    check_values,
    cluster_for_check,
)
from labsupport.runtime.language import N_, _

# ------------------------------------------------------------------ inputs


def _device() -> torch.device:
    from labsupport.runtime.launch import rank_device

    return rank_device()


def _distinct_rows(rank: int, world_size: int, length: int = 3) -> tuple[torch.Tensor]:
    """Rank r holds [10r, 10r+1, ...]: every value says where it came from."""
    return (torch.arange(length, dtype=torch.float32, device=_device()) + 10 * rank,)


def _reduce_scatter_input(rank: int, world_size: int) -> tuple[torch.Tensor]:
    """Two elements per rank's chunk, different on every rank."""
    values = torch.arange(2 * world_size, dtype=torch.float32) * (rank + 1) + 100 * rank
    return (values.to(_device()),)


# -------------------------------------------------------------- references


def _all_gather_reference(tensor: torch.Tensor) -> list[torch.Tensor]:
    import torch.distributed as dist

    out = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(out, tensor)
    return out


def _reduce_scatter_reference(tensor: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    chunks = list(tensor.chunk(dist.get_world_size()))
    out = torch.empty_like(chunks[0])
    dist.reduce_scatter(out, chunks)
    return out


def _ring_exchange_reference(tensor: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    rank, size = dist.get_rank(), dist.get_world_size()
    received = torch.empty_like(tensor)
    ops = [
        dist.P2POp(dist.isend, tensor, (rank + 1) % size),
        dist.P2POp(dist.irecv, received, (rank - 1) % size),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return received


def _extra_bytes_reference(n_bytes: float, world_size: int) -> float:
    all_reduce = 2 * (world_size - 1) / world_size * n_bytes
    reduce_scatter = (world_size - 1) / world_size * n_bytes
    return all_reduce - reduce_scatter


# ----------------------------------------------------------------- notebook 01


def check_prediction(
    predict: Callable[[int], Any],
    sequence: Callable[[], Any],
    *,
    cluster: Any = None,
    name: str | None = None,
) -> CheckResult:
    """Compare ``predict(world_size)`` (one value per rank) with what ``sequence`` leaves.

    ``name`` names the exercise in the message (default: Exercise 01.1)."""
    if name is None:
        name = _("Exercise 01.1")
    with cluster_for_check(cluster) as running:
        world_size = running.world_size
        actual = running.run(sequence)
    return check_values(lambda: predict(world_size), actual, name=name, exact=True)


def check_all_gather_with_broadcast(fn: Callable, *, cluster: Any = None) -> CheckResult:
    """Exercise 01.2: ``fn(tensor)`` must return the list ``dist.all_gather`` fills."""
    return check_on_ranks(
        fn,
        _all_gather_reference,
        _distinct_rows,
        name=_("Exercise 01.2 (all_gather from broadcast)"),
        cluster=cluster,
        exact=True,
    )


def check_reduce_scatter_with_all_reduce(fn: Callable, *, cluster: Any = None) -> CheckResult:
    """Exercise 01.3: ``fn(tensor)`` must return this rank's chunk of the sum over ranks."""
    return check_on_ranks(
        fn,
        _reduce_scatter_reference,
        _reduce_scatter_input,
        name=_("Exercise 01.3 (reduce_scatter from all_reduce)"),
        cluster=cluster,
        exact=True,
    )


def check_extra_bytes(fn: Callable[[float, int], float]) -> CheckResult:
    """Exercise 01.4: bytes each rank sends beyond a bandwidth-optimal reduce_scatter."""
    cases = [(1e6, 2), (1e6, 4), (4096, 8), (3 * 2**20, 16)]
    name = _("Exercise 01.4 extra_bytes_sent")
    return check_function(fn, _extra_bytes_reference, cases, name=name)


# ----------------------------------------------------------------- notebook 02


def check_ring_exchange(fn: Callable, *, cluster: Any = None, timeout: float = 10.0) -> CheckResult:
    """Exercise 02.1: ``fn(tensor)`` sends to rank+1, returns what came from rank-1, no deadlock."""
    return check_on_ranks(
        fn,
        _ring_exchange_reference,
        _distinct_rows,
        name=_("Exercise 02.1 (ring exchange)"),
        cluster=cluster,
        timeout=timeout,
        exact=True,
        hints={
            "timeout": _(
                "Hint: a rank blocked in recv waits for a send its neighbour has not "
                "reached. Start the send without waiting (isend), or order the calls by parity."
            )
        },
    )


# The two groups of Exercise 02.2: (the group's label, the label of its all_reduce's result),
# the keys of what each rank describes. Translated on the rank (the message shows them).
_GROUPS = (
    # translators: keys of a rank's description, shown as ['node group']: expected [0, 1], got ...
    (N_("node group"), N_("all_reduce(rank) in the node group")),
    (N_("cross-node group"), N_("all_reduce(rank) in the cross-node group")),
)


def _expected_groups(ranks_per_node: int) -> dict[str, Any]:
    import torch.distributed as dist

    rank, size = dist.get_rank(), dist.get_world_size()
    node, local = divmod(rank, ranks_per_node)
    node_ranks = list(range(node * ranks_per_node, (node + 1) * ranks_per_node))
    cross_ranks = list(range(local, size, ranks_per_node))
    (node_group, node_sum), (cross_group, cross_sum) = _GROUPS
    expected: dict[str, Any] = {_(node_group): node_ranks, _(cross_group): cross_ranks}
    expected[_(node_sum)] = float(sum(node_ranks))
    expected[_(cross_sum)] = float(sum(cross_ranks))
    return expected


def _describe_groups(fn: Callable, ranks_per_node: int) -> dict[str, Any]:
    """Call the learner's builder on this rank; describe the two groups it returned."""
    import torch.distributed as dist

    groups = fn(ranks_per_node)
    if not isinstance(groups, tuple | list) or len(groups) != 2:
        # translators: {value} is what the learner's function returned instead of two groups;
        # shown as ['returned']: expected a dict with keys [...], got {'returned': '...'}
        returned = _("{value} (expected a pair: (node_group, cross_group))")
        return {_("returned"): returned.format(value=repr(groups))}
    described: dict[str, Any] = {}
    for (label, _sum), group in zip(_GROUPS, groups, strict=True):
        if group is None or group == dist.GroupMember.NON_GROUP_MEMBER:
            described[_(label)] = _("this rank is not a member (GroupMember.NON_GROUP_MEMBER)")
        else:
            described[_(label)] = dist.get_process_group_ranks(group)
    for (label, total), group in zip(_GROUPS, groups, strict=True):
        if isinstance(described[_(label)], list):
            value = torch.tensor([float(dist.get_rank())], device=_device())
            dist.all_reduce(value, group=group)
            described[_(total)] = value.item()
        else:
            described[_(total)] = _("(not run: not a member)")
    return described


def check_node_groups(
    fn: Callable[[int], tuple[Any, Any]],
    *,
    ranks_per_node: int | None = None,
    cluster: Any = None,
    timeout: float = 20.0,
) -> CheckResult:
    """Exercise 02.2: ``fn(ranks_per_node)`` returns (this rank's node group, its cross-node group).

    By default the running cluster is cut into 2 "nodes" (``ranks_per_node`` = half of it).
    """
    with cluster_for_check(cluster) as running:
        per_node = ranks_per_node or max(1, running.world_size // 2)
        return check_on_ranks(
            functools.partial(_describe_groups, fn),
            _expected_groups,
            lambda rank, world_size: (per_node,),
            name=_("Exercise 02.2 (groups for {nodes} nodes x {per_node} ranks)").format(
                nodes=running.world_size // per_node, per_node=per_node
            ),
            cluster=running,
            timeout=timeout,
        )
