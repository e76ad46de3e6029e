"""The netem group gives gloo's values, on every collective and algorithm, and really takes time.

Each cluster runs on a near-instant network (no latency, 1 TB/s) so that the
value tests are quick; a gloo subgroup of the same ranks gives the reference.
"""

from __future__ import annotations

import pytest

import labsupport as lab
from labsupport import netem
from labsupport.netem import Link, Network

FAST = Link(0.0, 1e12)


def _network(p: int) -> Network:
    return Network(intra=FAST, inter=FAST, ranks_per_node=2 if p % 2 == 0 else None)


def compare_with_gloo() -> list[str]:
    """On every rank: every collective, algorithm, op and size, netem against gloo."""
    import torch
    import torch.distributed as dist

    from labsupport import netem
    from labsupport.runtime import emulator

    R = dist.ReduceOp
    gloo = dist.new_group(backend="gloo")
    p, me = dist.get_world_size(), dist.get_rank()
    wrong: list[str] = []

    def same(what: str, a, b) -> None:
        if isinstance(a, list):
            ok = all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        else:
            ok = torch.equal(a, b)
        if not ok:
            wrong.append(what)

    def data(n: int, dtype, salt: int = 0) -> torch.Tensor:
        g = torch.Generator().manual_seed(n * 31 + me * 7 + salt)
        if dtype == torch.bool:
            return torch.randint(0, 2, (n,), generator=g).bool()
        return torch.randint(1, 4, (n,), generator=g).to(dtype)  # small: exact sums and products

    def both(fn, *tensors):
        mine = [t.clone() if torch.is_tensor(t) else [x.clone() for x in t] for t in tensors]
        ref = [t.clone() if torch.is_tensor(t) else [x.clone() for x in t] for t in tensors]
        fn(*mine, group=None)
        fn(*ref, group=gloo)
        return mine, ref

    sizes = sorted({1, max(1, p - 1), p + 1, 37})
    for algorithm in netem.ALGORITHMS:
        emulator.set_algorithm(algorithm)
        for n in sizes:
            for dtype, ops in [
                (torch.int64, [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]),
                (torch.float32, [R.SUM, R.AVG, R.MAX]),
                (torch.bool, [R.SUM, R.MIN]),
            ]:
                for op in ops:
                    call = lambda t, group, op=op: dist.all_reduce(t, op, group)  # noqa: E731
                    (a,), (b,) = both(call, data(n, dtype))
                    same(f"all_reduce {algorithm} {dtype} {op} n={n}", a, b)
                x = data(n, dtype)
                (a,), (b,) = both(lambda t, group: dist.broadcast(t, p - 1, group), x)
                same(f"broadcast {algorithm} {dtype} n={n}", a, b)
                (a,), (b,) = both(lambda t, group: dist.reduce(t, p // 2, R.SUM, group), x)
                if me == p // 2:
                    same(f"reduce {algorithm} {dtype} n={n}", a, b)
            x = data(n, torch.int64, 1)
            outs = [torch.zeros(n, dtype=torch.int64) for _ in range(p)]
            (a, _), (b, _) = both(lambda o, t, group: dist.all_gather(o, t, group), outs, x)
            same(f"all_gather {algorithm} n={n}", a, b)
            out = torch.zeros(p * n, dtype=torch.int64)
            (a, _), (b, _) = both(
                lambda o, t, group: dist.all_gather_into_tensor(o, t, group), out, x
            )
            same(f"all_gather_into_tensor {algorithm} n={n}", a, b)
            ins = [data(n, torch.int64, 2 + r) for r in range(p)]
            out = torch.zeros(n, dtype=torch.int64)
            call = lambda o, i, group: dist.reduce_scatter(o, i, group=group)  # noqa: E731
            (a, _), (b, _) = both(call, out, ins)
            same(f"reduce_scatter {algorithm} n={n}", a, b)
            big = torch.cat(ins)
            (a, _), (b, _) = both(
                lambda o, i, group: dist.reduce_scatter_tensor(o, i, R.MAX, group), out, big
            )
            same(f"reduce_scatter_tensor MAX {algorithm} n={n}", a, b)
            outs = [torch.zeros(n, dtype=torch.int64) for _ in range(p)]
            (a, _), (b, _) = both(lambda o, i, group: dist.all_to_all(o, i, group), outs, ins)
            same(f"all_to_all n={n}", a, b)
            (a, _), (b, _) = both(
                lambda o, i, group: dist.all_to_all_single(o, i, group=group),
                torch.zeros(p * n, dtype=torch.int64), big,
            )  # fmt: skip
            same(f"all_to_all_single n={n}", a, b)
            gl = [torch.zeros(n, dtype=torch.int64) for _ in range(p)] if me == p - 1 else []
            (a, _), (b, _) = both(
                lambda t, o, group: dist.gather(t, o if me == p - 1 else None, p - 1, group), x, gl
            )
            if me == p - 1:
                same(f"gather n={n}", a, b)
            (a, _), (b, _) = both(
                lambda o, i, group: dist.scatter(o, i if me == 0 else None, 0, group),
                torch.zeros(n, dtype=torch.int64), ins,
            )  # fmt: skip
            same(f"scatter n={n}", a, b)
        dist.barrier()
    return wrong


@pytest.mark.parametrize("p", [1, 3, 4, 6, 8])
def test_every_collective_and_algorithm_gives_gloos_values(p):
    with lab.Cluster(p, network=_network(p), timeout=240) as cluster:
        wrong = cluster.run(compare_with_gloo)
    assert wrong == [[]] * p


# ------------------------------------------------------------------ time, DDP, no network
def timings(nbytes: int) -> dict:
    """On every rank of 2: how long isend, a blocking recv and an all_reduce take."""
    import time

    import torch
    import torch.distributed as dist

    t = torch.zeros(nbytes // 4)
    dist.barrier()
    out = {}
    if dist.get_rank() == 0:
        start = time.monotonic()
        work = dist.isend(t, 1)
        out["isend_returned"] = time.monotonic() - start
        work.wait()
        out["send_done"] = time.monotonic() - start
        out["send_posted_at"] = start  # time.monotonic() is one clock for both processes
    else:
        dist.recv(t, 0)
        out["recv_done_at"] = time.monotonic()
    dist.barrier()
    start = time.monotonic()
    dist.all_reduce(t)
    out["all_reduce"] = time.monotonic() - start
    return out


def test_messages_and_collectives_take_at_least_the_link_time_and_isend_is_asynchronous():
    link = Link(latency=20e-3, bandwidth=10e6)  # 400 kB: 20 ms + 40 ms = 60 ms per message
    nbytes = 400_000
    with lab.Cluster(2, network=Network(intra=link), timeout=60) as cluster:
        sender, receiver = cluster.run(timings, nbytes)
    one = link.time(nbytes)
    assert sender["isend_returned"] < one / 3  # returns at once, the wire time comes later
    assert sender["send_done"] >= one * 0.99
    # the receiver has the data no sooner than the link time after the send was posted
    assert receiver["recv_done_at"] - sender["send_posted_at"] >= one * 0.99
    # ring all-reduce on 2 ranks: 2 steps of half the buffer each
    assert receiver["all_reduce"] >= 2 * link.time(nbytes / 2) * 0.99


def handles() -> dict:
    """On every rank of 2: what an async all_reduce's Work and an irecv's future report."""
    import time

    import torch
    import torch.distributed as dist

    out = {}
    dist.barrier()
    start = time.monotonic()
    work = dist.all_reduce(torch.ones(4), async_op=True)
    out["done_at_once"] = work.is_completed()
    work.get_future().wait()
    out["future_after"] = time.monotonic() - start
    out["done_after_wait"] = work.wait() and work.is_completed()
    got = torch.zeros(2)
    if dist.get_rank() == 0:
        dist.send(torch.tensor([1.0, 2.0]), 1)
    else:
        dist.irecv(got, 0).get_future().wait()
    start = time.monotonic()
    dist.barrier()
    out["barrier"] = time.monotonic() - start
    return out | {"got": got.tolist()}


def test_works_complete_at_their_emulated_end_and_futures_fire_then():
    link = Link(latency=20e-3, bandwidth=1e9)
    with lab.Cluster(2, network=Network(intra=link), timeout=60) as cluster:
        out = cluster.run(handles)
    for rank in out:
        assert not rank["done_at_once"] and rank["done_after_wait"]
        assert rank["future_after"] >= 2 * link.latency * 0.99  # ring on 2 ranks: 2 steps
        assert rank["barrier"] >= link.latency * 0.99  # one round of the dissemination barrier
    assert out[1]["got"] == [1.0, 2.0]


def ddp_grads() -> list:
    """One DDP step; the gradients, which must be the same on every rank and backend."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 3))
    torch.manual_seed(dist.get_rank())
    model(torch.randn(4, 8)).sum().backward()
    return [p.grad.clone() for p in model.parameters()]


def test_ddp_trains_on_the_emulated_network_with_the_same_gradients_as_gloo():
    with lab.Cluster(2, network="one-node", timeout=60) as cluster:
        emulated = cluster.run(ddp_grads)
        assert cluster.run(lambda: __import__("torch").distributed.get_backend()) == ["netem"] * 2
    with lab.Cluster(2, backend="gloo", timeout=60) as cluster:
        real = cluster.run(ddp_grads)
    for a, b in zip(emulated[0], real[0], strict=True):
        assert a.allclose(b, rtol=1e-5, atol=1e-6)


def test_a_cluster_without_network_is_plain_gloo():
    def where() -> tuple:
        import os

        import torch.distributed as dist

        return dist.get_backend(), "LABSUPPORT_NETWORK" in os.environ

    with lab.Cluster(2, backend="gloo", timeout=60) as cluster:
        assert cluster.network is None
        assert cluster.run(where) == [("gloo", False)] * 2


def test_ranks_magic_starts_an_emulated_cluster_and_subgroups_work():
    from labsupport.runtime.magics import cluster_for

    cluster, _ = cluster_for("-n 4 --network two-nodes")
    try:
        assert cluster.network == netem.PRESETS["two-nodes"]
        source = (
            "sub = dist.new_group([1, 2])\n"
            "t = torch.tensor([rank + 1])\n"
            "if rank in (1, 2):\n"
            "    dist.all_reduce(t, group=sub)\n"
            "(dist.get_backend(), t.item())"
        )
        assert cluster.exec(source) == [("netem", 1), ("netem", 5), ("netem", 5), ("netem", 4)]
        same, _ = cluster_for("--network two-nodes")
        assert same is cluster  # the same network: the running cluster is kept
    finally:
        cluster.shutdown()


def chained_collectives() -> list[float]:
    """A future's callback that issues another collective and waits for it (powerSGD_hook's way)."""
    import torch
    import torch.distributed as dist

    x, y = torch.ones(4), torch.full((4,), 2.0)

    def then_all_reduce_y(fut):
        return dist.all_reduce(y, async_op=True).get_future().wait()[0]

    return dist.all_reduce(x, async_op=True).get_future().then(then_all_reduce_y).wait().tolist()


def test_a_callback_may_wait_for_another_collective_without_deadlock():
    """netem completes each future off its collective thread: torch's powerSGD_hook chains so."""
    with lab.Cluster(2, network=_network(2), timeout=20) as cluster:
        assert cluster.run(chained_collectives) == [[4.0] * 4] * 2
