"""Rotating steps: a ring stored as one rule per phase gives the same transfers as arrays would."""

import numpy as np
import pytest

from labsupport import schedules as sch


def test_ring_steps_share_their_arrays_and_compute_the_same_chunks():
    p = 7
    ring = sch.ring_all_reduce(p)
    r = np.arange(p)
    for s, st in enumerate(ring.steps[: p - 1]):  # reduce-scatter: chunk (r - s - 1) % p
        assert st.rotation is not None and st.src is ring.steps[0].src
        assert st.start.tolist() == ((r - s - 1) % p).tolist()
        assert np.all(st.count == 1) and np.all(st.stop == st.start + 1)
    for s, st in enumerate(ring.steps[p - 1 :]):  # all-gather: chunk (r - s) % p
        assert st.start.tolist() == ((r - s) % p).tolist()
        assert not st.reduce.any()


def test_a_big_ring_is_cheap_to_hold():
    ring = sch.ring_all_reduce(4096)
    assert len(ring) == 2 * 4095
    assert len({id(st.src) for st in ring.steps}) <= 2  # shared, not one array per step
    assert ring.steps[100].transfer(4095) == sch.Transfer(4095, 0, range(3994, 3995), True)


def test_a_rotation_that_leaves_the_buffer_is_refused():
    r = np.arange(4)
    bad = sch.Rotation(base=r, modulus=4, count=2)  # chunk 3 + 2 would pass the end
    steps = (sch.Step.rotating(r, (r + 1) % 4, np.ones(4, bool), bad, 0),)
    with pytest.raises(sch.ScheduleError, match="invalid transfer"):
        sch.Schedule("bad", "all_reduce", 4, 4, steps)


def test_mapped_rotating_steps_rename_ranks_and_keep_chunks():
    st = sch.ring_all_reduce(4).steps[0]
    order = np.array([0, 2, 1, 3])
    moved = st.mapped(order)
    assert moved.src.tolist() == order.tolist() and moved.start.tolist() == st.start.tolist()


@pytest.mark.parametrize(("intra", "inside"), [("ring", 3), ("direct", 1)])
def test_hierarchical_pieces_stay_inside_their_node_then_cross(intra, inside):
    s = sch.hierarchical_all_reduce(8, 4, intra)  # 2 nodes of 4: ring 3 steps inside, direct 1
    assert len(s) == 2 * inside + 2 * 1
    first, middle = s.steps[0], s.steps[inside]
    assert np.all(first.src // 4 == first.dst // 4)  # inside a node
    assert np.all(middle.src // 4 != middle.dst // 4) and np.all(middle.src % 4 == middle.dst % 4)
    assert np.all(first.count == 2)  # a piece is nodes = 2 chunks
    # a ring sends to one neighbour per step; direct sends to all 3 others at once
    assert np.bincount(first.src).max() == 4 - inside
