"""The collectives the benchmark knows: their sizes and their nccl-tests columns.

Conventions are nccl-tests' (``doc/PERFORMANCE.md``; see REFERENCES.md):

* ``size`` is the bytes S that algbw = S / t counts: the whole buffer, or for
  all_gather, reduce_scatter and all_to_all the whole n-rank buffer;
* ``count`` is the element count of one call's parameter: the buffer for
  all_reduce, broadcast, reduce and send/recv, one rank's piece for the others;
* busbw = algbw x :func:`busbw_factor` (defined in :mod:`labsupport.costmodel`,
  re-exported here);
* the reduction ops, by nccl-tests' names (``--op sum``), are the core's
  :data:`labsupport.reduce_ops.BY_NAME`.

The buffers, the calls and the checks are in :mod:`labsupport.runtime.bench.cases`, the exact
inputs and results in :mod:`labsupport.runtime.bench.values`.
"""

from __future__ import annotations

from dataclasses import dataclass

from labsupport.costmodel import busbw_factor

__all__ = ["COLLECTIVES", "CollectiveInfo", "busbw_factor", "count_and_size"]


@dataclass(frozen=True)
class CollectiveInfo:
    """What the benchmark needs to know about one collective."""

    name: str
    reduces: bool  # has a reduction op (the ``redop`` column)
    rooted: bool  # has a root (the ``root`` column)
    per_rank_count: bool  # ``count`` is one rank's piece, ``size`` is n pieces
    in_place: bool  # has an in-place form here
    min_ranks: int = 1


COLLECTIVES: dict[str, CollectiveInfo] = {
    c.name: c
    for c in (
        #               name            reduces rooted per_rank in_place min_ranks
        CollectiveInfo("all_reduce",     True,  False, False,   True),
        CollectiveInfo("all_gather",     False, False, True,    True),
        CollectiveInfo("reduce_scatter", True,  False, True,    True),
        CollectiveInfo("broadcast",      False, True,  False,   True),
        CollectiveInfo("reduce",         True,  True,  False,   True),
        CollectiveInfo("all_to_all",     False, False, True,    False),
        CollectiveInfo("sendrecv",       False, False, False,   False,   2),
    )
}  # fmt: skip


def count_and_size(collective: str, nbytes: int, itemsize: int, nranks: int) -> tuple[int, int]:
    """(count, size) for a requested size in bytes, rounded down as nccl-tests does."""
    count = nbytes // itemsize
    if COLLECTIVES[collective].per_rank_count:
        count //= nranks
        return count, count * nranks * itemsize
    return count, count * itemsize
