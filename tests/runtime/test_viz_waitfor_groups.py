"""The deadlock picture (runtime.viz.waitfor) and the group grid (runtime.viz.groups)."""

from __future__ import annotations

import matplotlib
import pytest

from labsupport.runtime.viz import groups, waitfor

matplotlib.use("Agg")


def _stack(line: str, call: str = "recv") -> str:
    return (
        "Stack (most recent call last):\n"
        '  File "<rank-cell-1>", line 4, in <module>\n'
        f"    {line}\n"
        f'  File "torch/distributed/distributed_c10d.py", line 2799, in {call}\n'
        "    work.wait()"
    )


RING = {r: _stack("dist.recv(incoming, src=(rank - 1) % world_size)  # waits") for r in range(4)}


def test_each_rank_waits_for_the_peer_its_line_names():
    waits = waitfor.blocked_calls(RING)
    assert [(w.call, w.peer) for w in waits.values()] == [
        ("recv", 3),
        ("recv", 0),
        ("recv", 1),
        ("recv", 2),
    ]
    assert waitfor.find_cycle(waits) == [0, 3, 2, 1]


def test_no_cycle_when_the_peer_cannot_be_known_or_the_chain_ends():
    unknown = {r: _stack("dist.recv(incoming, src=left)") for r in range(2)}
    assert [w.peer for w in waitfor.blocked_calls(unknown).values()] == [None, None]
    chain = {1: _stack("dist.recv(x, src=rank - 1)"), 2: _stack("dist.recv(x, rank - 1)")}
    waits = waitfor.blocked_calls(chain, world_size=4)
    assert [w.peer for w in waits.values()] == [0, 1]
    assert waitfor.find_cycle(waits) == []  # rank 0 is not blocked: it can still send


def test_the_drawing_names_the_cycle():
    fig = waitfor.draw_wait_for(RING)
    assert "0 → 3 → 2 → 1 → 0" in fig.axes[0].get_title()
    quiet = waitfor.draw_wait_for({0: _stack("dist.barrier()", "barrier")}, world_size=2)
    assert "no wait-for cycle" in quiet.axes[0].get_title()


def test_groups_are_drawn_once_each_on_the_node_grid():
    assert groups.unique_groups([[1, 0], [0, 1], [2, 3]]) == [[0, 1], [2, 3]]
    fig = groups.draw_groups(2, 4, {"intra": [[0, 1, 2, 3], [4, 5, 6, 7]], "inter": [[0, 4]]})
    assert [ax.get_title() for ax in fig.axes] == ["intra", "inter"]
    inter = fig.axes[1]
    white = [p for p in inter.patches if p.get_facecolor()[:3] == (1.0, 1.0, 1.0)]
    assert len(inter.patches) == 8 and len(white) == 6  # only ranks 0 and 4 are in a group
    with pytest.raises(ValueError, match="rank 9 is not in a job of 2 x 4"):
        groups.draw_groups(2, 4, {"bad": [[9]]})
