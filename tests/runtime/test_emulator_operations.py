"""The netem group records every operation it executes, however the caller spelled it."""

from __future__ import annotations

import labsupport as lab
from labsupport.netem import Link, Network

LINK = Link(latency=1e-3, bandwidth=100e6)  # 1 ms, 100 MB/s


def spelled_every_way() -> list[tuple]:
    """On every rank: all-reduces called four ways, and a send/recv pair; what was logged."""
    import torch
    import torch.distributed as dist
    from torch.distributed import all_reduce

    from labsupport.runtime import emulator

    t = torch.ones(1000)
    with emulator.operations() as ops:
        dist.all_reduce(t)
        all_reduce(t)
        dist.all_reduce(t, async_op=True).get_future().wait()
        torch.futures.wait_all([dist.all_reduce(t, async_op=True).get_future()])
        if dist.get_rank() == 0:
            dist.send(t, 1)
        else:
            dist.recv(t, 0)
    return [(op.name, op.nbytes, op.issued, op.end, op.in_backward) for op in ops]


def in_a_hook() -> list[bool]:
    """On every rank: an all-reduce issued from a gradient hook is marked in_backward."""
    import torch
    import torch.distributed as dist

    from labsupport.runtime import emulator

    w = torch.ones(3, requires_grad=True)
    works = []
    w.register_post_accumulate_grad_hook(
        lambda p: works.append(dist.all_reduce(p.grad, async_op=True))
    )
    with emulator.operations() as ops:
        (2 * w).sum().backward()
        works[0].wait()
        dist.barrier()
    return [op.in_backward for op in ops]


def test_every_spelling_is_recorded_with_its_emulated_times() -> None:
    with lab.Cluster(2, network=Network(intra=LINK), timeout=60) as cluster:
        logs = cluster.call(spelled_every_way)
        hooks = cluster.call(in_a_hook)
    for rank, log in enumerate(logs):
        names = [name for name, *_ in log]
        assert names == ["all_reduce"] * 4 + ["send" if rank == 0 else "recv"]
        for _name, nbytes, issued, end, _ in log:
            assert nbytes == 4000
            assert end is not None and end >= issued
        # a ring all-reduce of 2 ranks: two messages of 2 kB over 1 ms, 100 MB/s each, plus
        # the reductions' CPU time (this machine's, so only bounded loosely above)
        first = log[0]
        wire = 2 * (1e-3 + 2000 / 100e6)
        assert wire - 1e-9 <= first[3] - first[2] < wire + 5e-3
        # blocking calls: each starts after the previous one ended
        for before, after in zip(log[:3], log[1:4], strict=True):
            assert after[2] >= before[3] - 1e-9
    assert hooks == [[True, False], [True, False]]


def test_outside_a_block_nothing_is_kept() -> None:
    from labsupport.runtime.emulator.state import STATE

    assert STATE.operation_logs == []
