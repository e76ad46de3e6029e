"""One collective at one size on this rank: its buffers, the call, the check.

torch.distributed has no out-of-place form of all_reduce, broadcast and reduce
(the tensor is both input and output). For those, the out-of-place column
times a copy of the input into the output buffer followed by the in-place
call: what a torch user pays to keep their input. all_to_all and send/recv
have no in-place form here (nccl-tests does not verify theirs either), so
their in-place columns are N/A.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from labsupport.dist_names import quiet_renamed
from labsupport.reduce_ops import BY_NAME
from labsupport.runtime.bench.values import count_wrong, fill, input_values, reduced_values

quiet_renamed()  # torch 2.13 deprecates two names torch_npu still needs (see dist_names)


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
        fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        if not self.in_place:
            self.out.copy_(self.inp)  # torch's all_reduce works in place
        dist.all_reduce(self.out, op=BY_NAME[self.op])

    def wrong(self) -> int:
        return count_wrong(self.out, reduced_values(self.n, self.index(0, self.count), self.op))


class AllGather(Case):
    """all_gather: every rank ends with all ranks' pieces, in rank order."""

    def allocate(self) -> None:
        self.out = self.empty(self.n * self.count)
        own = self.out[self.rank * self.count : (self.rank + 1) * self.count]
        self.inp = own if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.all_gather_into_tensor(self.out, self.inp)

    def wrong(self) -> int:
        index = self.index(0, self.count)
        expected = torch.cat([input_values(r, self.n, index, self.op) for r in range(self.n)])
        return count_wrong(self.out, expected)


class ReduceScatter(Case):
    """reduce_scatter: rank r ends with piece r of the reduction of all ranks' buffers."""

    def allocate(self) -> None:
        self.inp = self.empty(self.n * self.count)
        own = self.inp[self.rank * self.count : (self.rank + 1) * self.count]
        self.out = own if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        if not self.in_place:
            self.out.zero_()
        fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.reduce_scatter_tensor(self.out, self.inp, op=BY_NAME[self.op])

    def wrong(self) -> int:
        index = self.index(self.rank * self.count, self.count)
        return count_wrong(self.out, reduced_values(self.n, index, self.op))


class Broadcast(Case):
    """broadcast: every rank ends with the root's buffer."""

    def allocate(self) -> None:
        self.out = self.empty(self.count)
        self.inp = self.out if self.in_place else self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        fill(self.inp, self.rank, self.n, self.op)  # only the root's input matters

    def run(self) -> None:
        if not self.in_place and self.rank == self.root:
            self.out.copy_(self.inp)  # torch's broadcast works in place
        dist.broadcast(self.out, src=self.root)

    def wrong(self) -> int:
        index = self.index(0, self.count)
        return count_wrong(self.out, input_values(self.root, self.n, index, self.op))


class Reduce(AllReduce):
    """reduce: the root ends with the reduction of all ranks' buffers (others: undefined).

    Buffers and inputs as for all_reduce; only the call and who is checked differ.
    """

    def run(self) -> None:
        if not self.in_place:
            self.out.copy_(self.inp)  # torch's reduce works in place
        dist.reduce(self.out, dst=self.root, op=BY_NAME[self.op])

    def wrong(self) -> int:
        return super().wrong() if self.rank == self.root else 0


class AllToAll(Case):
    """all_to_all: piece p of rank r's input becomes piece r of rank p's output."""

    def allocate(self) -> None:
        self.inp = self.empty(self.n * self.count)
        self.out = self.empty(self.n * self.count)

    def fill(self) -> None:
        self.out.zero_()
        fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        dist.all_to_all_single(self.out, self.inp)

    def wrong(self) -> int:
        index = self.index(self.rank * self.count, self.count)
        expected = torch.cat([input_values(s, self.n, index, self.op) for s in range(self.n)])
        return count_wrong(self.out, expected)


class SendRecv(Case):
    """send/recv as nccl-tests does it: each rank sends to rank+1 and receives from rank-1.

    With two ranks this is a pair exchanging buffers, both directions at once.
    """

    def allocate(self) -> None:
        self.inp = self.empty(self.count)
        self.out = self.empty(self.count)

    def fill(self) -> None:
        self.out.zero_()
        fill(self.inp, self.rank, self.n, self.op)

    def run(self) -> None:
        ops = [
            dist.P2POp(dist.isend, self.inp, (self.rank + 1) % self.n),
            dist.P2POp(dist.irecv, self.out, (self.rank - 1) % self.n),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def wrong(self) -> int:
        peer = (self.rank - 1) % self.n
        return count_wrong(self.out, input_values(peer, self.n, self.index(0, self.count), self.op))


CASES: dict[str, type[Case]] = {
    "all_reduce": AllReduce,
    "all_gather": AllGather,
    "reduce_scatter": ReduceScatter,
    "broadcast": Broadcast,
    "reduce": Reduce,
    "all_to_all": AllToAll,
    "sendrecv": SendRecv,
}


def make_case(
    collective: str,
    count: int,
    dtype: torch.dtype,
    device: torch.device,
    in_place: bool,
    op: str = "sum",
    root: int = 0,
) -> Case:
    """Buffers and call for ``collective`` with ``count`` elements (see :class:`Case`)."""
    return CASES[collective](count, dtype, device, in_place, op, root)
