"""The collectives the benchmark knows: sizes, busbw factors, buffers, the call, the check.

Conventions are nccl-tests' (``doc/PERFORMANCE.md``; see REFERENCES.md):

* ``size`` is the bytes S that algbw = S / t counts: the whole buffer, or for
  all_gather, reduce_scatter and all_to_all the whole n-rank buffer;
* ``count`` is the element count of one call's parameter: the buffer for
  all_reduce, broadcast, reduce and send/recv, one rank's piece for the others;
* busbw = algbw x :func:`busbw_factor` (defined in :mod:`labsupport.costmodel`,
  re-exported here).

Every input is a small integer stored in the benchmark's dtype, chosen so that
the reduced result is an integer too, exactly representable (see
:func:`input_values`). The expected result is therefore known exactly and
``#wrong`` counts mismatched elements with ``!=``, no tolerance.

torch.distributed has no out-of-place form of all_reduce, broadcast and reduce
(the tensor is both input and output). For those, the out-of-place column
times a copy of the input into the output buffer followed by the in-place
call: what a torch user pays to keep their input. all_to_all and send/recv
have no in-place form here (nccl-tests does not verify theirs either), so
their in-place columns are N/A.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist

from labsupport.costmodel import busbw_factor  # noqa: F401 - re-exported, the old name

#: Reduction names (nccl-tests' spelling) and torch's ops.
REDOPS: dict[str, dist.ReduceOp.RedOpType] = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}

# torch 2.13 deprecates all_gather_into_tensor / reduce_scatter_tensor in favour
# of names torch_npu does not have yet: keep the old names, quietly.
for _name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    warnings.filterwarnings("ignore", f".*{_name}.* is deprecated", FutureWarning)


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


def input_values(rank: int, nranks: int, index: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """The integer that ``rank`` puts at each position of ``index`` (an int64 tensor).

    ``op`` "copy" (collectives that only move data): 1..101, different on every
    rank, so a piece in the wrong place is caught. For reductions, small values
    whose reduction over ranks is an exact integer in every dtype, and not the
    same at every position:
    sum/min/max: 1..4, so a sum is at most 4n (exact in bfloat16 up to 64
    ranks, int8 up to 31); prod: one rank per element brings 2..4, all others
    1; avg: ranks come in pairs bringing c+1 and c-1 (an odd last rank brings
    c), so the mean is exactly c.
    """
    if op == "copy":
        return (index + 13 * rank) % 101 + 1
    if op == "prod":
        return torch.where((index + rank) % nranks == 0, index % 3 + 2, 1)
    if op == "avg":
        pair_offset = 0 if (rank == nranks - 1 and nranks % 2) else (1 if rank % 2 == 0 else -1)
        return index % 3 + 2 + pair_offset
    return (index + rank) % 2 + index % 3 + 1


def reduced_values(nranks: int, index: torch.Tensor, op: str) -> torch.Tensor:
    """The exact result of reducing :func:`input_values` over all ranks (int64)."""
    acc = input_values(0, nranks, index, op)
    for r in range(1, nranks):
        v = input_values(r, nranks, index, op)
        if op in ("sum", "avg"):
            acc = acc + v
        elif op == "prod":
            acc = acc * v
        elif op == "min":
            acc = torch.minimum(acc, v)
        else:
            acc = torch.maximum(acc, v)
    return acc // nranks if op == "avg" else acc


def _fill(t: torch.Tensor, rank: int, nranks: int, op: str, start: int = 0) -> None:
    index = torch.arange(start, start + t.numel(), device=t.device)
    t.copy_(input_values(rank, nranks, index, op))


def _wrong(result: torch.Tensor, expected: torch.Tensor) -> int:
    return int((result != expected.to(result.dtype)).sum())


class Case:
    """One collective at one size on this rank: buffers, the call, the check.

    ``fill()`` writes the known inputs (and zeroes the outputs), ``run()`` makes
    one call, ``wrong()`` counts this rank's mismatched elements after a
    ``fill()`` + ``run()``.
    """

    def __init__(
        self,
        count: int,
        dtype: torch.dtype,
        device: torch.device,
        in_place: bool,
        op: str = "sum",
        root: int = 0,
    ) -> None:
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.count, self.dtype, self.device = count, dtype, device
        self.in_place, self.op, self.root = in_place, op, root
        self.allocate()

    def empty(self, numel: int) -> torch.Tensor:
        """A new buffer of ``numel`` elements on this rank's device."""
        return torch.empty(numel, dtype=self.dtype, device=self.device)

    def index(self, start: int, numel: int) -> torch.Tensor:
        """Positions start .. start+numel-1, as int64 on this rank's device."""
        return torch.arange(start, start + numel, device=self.device)

    def allocate(self) -> None:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def fill(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def run(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def wrong(self) -> int:  # pragma: no cover
        raise NotImplementedError


class AllReduce(Case):
    """all_reduce: every rank ends with the reduction of all ranks' buffers."""

    def allocate(self) -> None:
        self.out = self.empty(self.count)
        self.inp = self.out if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        if not self.in_place:
            self.out.copy_(self.inp)  # torch's all_reduce works in place
        dist.all_reduce(self.out, op=REDOPS[self.op])

    def wrong(self) -> int:
        return _wrong(self.out, reduced_values(self.n, self.index(0, self.count), self.op))


class AllGather(Case):
    """all_gather: every rank ends with all ranks' pieces, in rank order."""

    def allocate(self) -> None:
        self.out = self.empty(self.n * self.count)
        own = self.out[self.rank * self.count : (self.rank + 1) * self.count]
        self.inp = own if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.all_gather_into_tensor(self.out, self.inp)

    def wrong(self) -> int:
        index = self.index(0, self.count)
        expected = torch.cat([input_values(r, self.n, index, self.op) for r in range(self.n)])
        return _wrong(self.out, expected)


class ReduceScatter(Case):
    """reduce_scatter: rank r ends with piece r of the reduction of all ranks' buffers."""

    def allocate(self) -> None:
        self.inp = self.empty(self.n * self.count)
        own = self.inp[self.rank * self.count : (self.rank + 1) * self.count]
        self.out = own if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        if not self.in_place:
            self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.reduce_scatter_tensor(self.out, self.inp, op=REDOPS[self.op])

    def wrong(self) -> int:
        index = self.index(self.rank * self.count, self.count)
        return _wrong(self.out, reduced_values(self.n, index, self.op))


class Broadcast(Case):
    """broadcast: every rank ends with the root's buffer."""

    def allocate(self) -> None:
        self.out = self.empty(self.count)
        self.inp = self.out if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)  # only the root's input matters

    def run(self) -> None:
        if not self.in_place and self.rank == self.root:
            self.out.copy_(self.inp)  # torch's broadcast works in place
        dist.broadcast(self.out, src=self.root)

    def wrong(self) -> int:
        index = self.index(0, self.count)
        return _wrong(self.out, input_values(self.root, self.n, index, self.op))


class Reduce(AllReduce):
    """reduce: the root ends with the reduction of all ranks' buffers (others: undefined).

    Buffers and inputs as for all_reduce; only the call and who is checked differ.
    """

    def run(self) -> None:
        if not self.in_place:
            self.out.copy_(self.inp)  # torch's reduce works in place
        dist.reduce(self.out, dst=self.root, op=REDOPS[self.op])

    def wrong(self) -> int:
        return super().wrong() if self.rank == self.root else 0


class AllToAll(Case):
    """all_to_all: piece p of rank r's input becomes piece r of rank p's output."""

    def allocate(self) -> None:
        self.inp = self.empty(self.n * self.count)
        self.out = self.empty(self.n * self.count)

    def fill(self) -> None:
        self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.all_to_all_single(self.out, self.inp)

    def wrong(self) -> int:
        index = self.index(self.rank * self.count, self.count)
        expected = torch.cat([input_values(s, self.n, index, self.op) for s in range(self.n)])
        return _wrong(self.out, expected)


class SendRecv(Case):
    """send/recv as nccl-tests does it: each rank sends to rank+1 and receives from rank-1.

    With two ranks this is a pair exchanging buffers, both directions at once.
    """

    def allocate(self) -> None:
        self.inp = self.empty(self.count)
        self.out = self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        _fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        ops = [
            dist.P2POp(dist.isend, self.inp, (self.rank + 1) % self.n),
            dist.P2POp(dist.irecv, self.out, (self.rank - 1) % self.n),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def wrong(self) -> int:
        peer = (self.rank - 1) % self.n
        return _wrong(self.out, input_values(peer, self.n, self.index(0, self.count), self.op))


CASES: dict[str, type[Case]] = {
    "all_reduce": AllReduce,
    "all_gather": AllGather,
    "reduce_scatter": ReduceScatter,
    "broadcast": Broadcast,
    "reduce": Reduce,
    "all_to_all": AllToAll,
    "sendrecv": SendRecv,
}


def make_case(collective: str, count: int, dtype: torch.dtype, device: torch.device,
              in_place: bool, op: str = "sum", root: int = 0) -> Case:  # fmt: skip
    """Buffers and call for ``collective`` with ``count`` elements (see :class:`Case`)."""
    return CASES[collective](count, dtype, device, in_place, op, root)
