"""Schedules as data: each one computes its collective, on paper and on a real process group."""

import numpy as np
import pytest
import torch

from labsupport import schedules as sch

POW2_ONLY = {"recursive_halving_reduce_scatter", "recursive_doubling_all_gather"}


# ---------------------------------------------------------------------------
# On paper: replay the schedule on sets of contributions.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(sch.BUILDERS))
def test_every_schedule_computes_its_collective(name):
    for p in range(1, 17):
        if name in POW2_ONLY and p & (p - 1):
            continue
        sch.verify(sch.BUILDERS[name](p))


@pytest.mark.parametrize("name", sorted(POW2_ONLY))
def test_power_of_two_schedules_refuse_other_sizes_clearly(name):
    with pytest.raises(sch.ScheduleError, match="power-of-two"):
        sch.BUILDERS[name](6)
    assert not sch.supports(name, 6) and sch.supports(name, 8)


@pytest.mark.parametrize("name", ["recursive_doubling_all_reduce", "rabenseifner_all_reduce"])
def test_doubling_all_reduce_folds_extra_ranks(name):
    s = sch.BUILDERS[name](6)  # 2 extra ranks fold into a group of 4
    assert len(s) == 2 + len(sch.BUILDERS[name](4))
    assert "folded" in s.note


@pytest.mark.parametrize("root", [0, 2, 4])
def test_trees_work_for_any_root(root):
    sch.verify(sch.binomial_broadcast(5, root=root))
    sch.verify(sch.binomial_reduce(5, root=root))
    sch.verify(sch.naive_all_reduce(5, root=root))


def test_ring_talks_only_to_the_right_neighbour_one_chunk_at_a_time():
    p = 5
    for st in sch.ring_all_reduce(p).steps:
        assert sorted(st.src.tolist()) == list(range(p))
        assert np.array_equal(st.dst, (st.src + 1) % p)
        assert np.all(st.stop - st.start == 1)


def test_ring_reduce_scatter_leaves_chunk_r_on_rank_r():
    final = sch.chunk_history(sch.ring_reduce_scatter(4))[-1]
    assert [final[r][r] for r in range(4)] == [0b1111] * 4


def test_an_all_gather_that_adds_is_caught():
    p = 4
    rs, ag = sch.ring_reduce_scatter(p), sch.ring_all_gather(p)
    adding = [sch.Step(s.src, s.dst, s.start, s.stop, np.ones(len(s), bool)) for s in ag.steps]
    broken = sch.Schedule("adds", "all_reduce", p, p, rs.steps + tuple(adding))
    with pytest.raises(sch.ScheduleError, match="twice"):
        sch.verify(broken)


def test_stopping_after_reduce_scatter_is_not_an_all_reduce():
    rs = sch.ring_reduce_scatter(3)
    with pytest.raises(sch.ScheduleError, match="rank 0's chunk 1"):
        sch.verify(sch.Schedule("rs only", "all_reduce", 3, 3, rs.steps))


def test_invalid_transfers_are_refused():
    with pytest.raises(sch.ScheduleError, match="invalid transfer"):
        sch.Schedule("x", "all_reduce", 2, 2, (sch.Step.of([sch.Transfer(0, 0, range(1), True)]),))
    with pytest.raises(sch.ScheduleError, match="invalid transfer"):
        sch.Schedule(
            "x", "all_reduce", 2, 2, (sch.Step.of([sch.Transfer(0, 1, range(1, 3), True)]),)
        )
    with pytest.raises(sch.ScheduleError, match="root"):
        sch.binomial_broadcast(4, root=4)


def test_transfers_round_trip_through_steps():
    ts = [sch.Transfer(0, 1, range(0, 2), True), sch.Transfer(1, 0, range(2, 3), False)]
    assert list(sch.Step.of(ts)) == ts
    assert str(ts[0]) == "0->1 c0..c1 (+=)"


def test_coverage_counts_contributions():
    counts = [c.copy() for c in sch.coverage(sch.ring_all_reduce(4))]
    assert len(counts) == 7
    assert counts[0].tolist() == [[1] * 4] * 4
    assert counts[3].diagonal().tolist() == [4] * 4  # after reduce-scatter
    assert counts[-1].tolist() == [[4] * 4] * 4


@pytest.mark.parametrize("n", [0, 1, 3, 7, 8, 100])
@pytest.mark.parametrize("k", [1, 3, 4])
def test_chunk_bounds_match_tensor_split(n, k):
    b = sch.chunk_bounds(n, k)
    assert np.diff(b).tolist() == [t.numel() for t in torch.arange(n).tensor_split(k)]


def test_format_steps_for_p4_ring():
    table = sch.format_steps(sch.ring_all_reduce(4)).splitlines()
    assert len(table) == 2 + 6
    assert table[2].startswith("| 0 | ->1 c3 (+=) | ->2 c0 (+=)")


# ---------------------------------------------------------------------------
# On a real process group: execute every schedule and compare with torch's own
# collectives (dist.all_reduce, reduce, broadcast).
# ---------------------------------------------------------------------------

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/


def _reference(sched, x, me, group):
    """What torch's collectives give for ``x`` (this rank's input) and where to compare."""
    import torch.distributed as dist

    n = x.numel()
    b = sch.chunk_bounds(n, sched.num_chunks)
    ref, where = x.clone(), slice(0, n)
    # The groups used here hold ranks 0..p-1, so group ranks equal global ranks.
    if sched.collective == "broadcast":
        dist.broadcast(ref, src=sched.root, group=group)
    elif sched.collective == "reduce":
        dist.reduce(ref, dst=sched.root, group=group)
        where = slice(0, n if me == sched.root else 0)
    elif sched.collective == "all_gather":
        ref = torch.zeros_like(x)  # an all-gather is an all-reduce of zero-padded pieces
        ref[b[me] : b[me + 1]] = x[b[me] : b[me + 1]]
        dist.all_reduce(ref, group=group)
    else:
        dist.all_reduce(ref, group=group)
        if sched.collective == "reduce_scatter":
            where = slice(b[me], b[me + 1])
    return ref, where


def _run_every_schedule(p, lengths):
    """On ranks 0..p-1: execute every schedule that p ranks support; return the failures."""
    import torch.distributed as dist

    me = dist.get_rank()
    group = dist.new_group(list(range(p))) if p < dist.get_world_size() else None
    if me >= p:
        return []
    failures = []
    for name, build in sch.BUILDERS.items():
        if not sch.supports(build, p):
            continue
        sched = build(p)
        for n in lengths:
            for dtype in (torch.int64, torch.float32):
                g = torch.Generator().manual_seed(97 * n + me)
                x = torch.randn(n, generator=g).mul(100).to(dtype)
                ref, where = _reference(sched, x, me, group)
                got = sch.execute(sched, x.clone(), group=group)
                if dtype.is_floating_point:
                    ok = torch.allclose(got[where], ref[where], rtol=1e-5, atol=1e-4)
                else:
                    ok = torch.equal(got[where], ref[where])
                if not ok:
                    failures.append(f"{name} p={p} n={n} {dtype} differs on rank {me}")
    return failures


def _ops_and_subgroups():
    """Other reduce ops, a 2-D tensor, a group of the odd ranks, and a wrong world size."""
    import torch.distributed as dist

    p, me = dist.get_world_size(), dist.get_rank()
    out = []
    for op in (dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        x = torch.arange(1, 12, dtype=torch.float64).reshape(1, 11) * (me + 1) - 3 * me
        ref = x.clone()
        dist.all_reduce(ref, op=op)
        out.append(torch.equal(sch.execute(sch.ring_all_reduce(p), x.clone(), op=op), ref))
    odd = dist.new_group([r for r in range(p) if r % 2])  # every rank calls new_group
    if me % 2:
        x = torch.full((7,), float(me))
        sch.execute(sch.rabenseifner_all_reduce(p // 2), x, group=odd)
        out.append(torch.equal(x, torch.full((7,), float(sum(range(1, p, 2))))))
    try:
        sch.execute(sch.ring_all_reduce(p + 1), torch.zeros(3))
        out.append(False)
    except sch.ScheduleError as e:
        out.append("built for" in str(e))
    return out


@pytest.fixture(scope="module")
def cluster():
    """One group of 8 ranks; world sizes 1..7 run on the subgroup of ranks 0..p-1."""
    lab = pytest.importorskip("labsupport")
    with lab.Cluster(8, backend="gloo", timeout=120) as c:
        yield c


@pytest.mark.parametrize("p", range(1, 9))
def test_execute_matches_torch_collectives(cluster, p):
    lengths = sorted({0, 1, p - 1, p, 2 * p + 1, 1000})
    failures = [f for rank in cluster.run(_run_every_schedule, p, lengths) for f in rank]
    assert failures == []


def test_execute_other_ops_subgroups_and_errors(cluster):
    assert all(all(r) for r in cluster.run(_ops_and_subgroups))
