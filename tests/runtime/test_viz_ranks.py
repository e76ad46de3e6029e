"""show_ranks: one row per rank, before and after, from gathered results or inside a rank."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
import torch.distributed as dist
from matplotlib.patches import Rectangle

from labsupport.runtime.viz.ranks import show_ranks


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _cells(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_in_the_notebook_the_figure_is_returned_not_left_open_to_show_twice():
    open_before = plt.get_fignums()  # figures another test left open are not ours
    fig = show_ranks([torch.zeros(2)] * 2)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert plt.get_fignums() == open_before


def test_one_row_per_rank_with_values_written_in_the_cells():
    before = [torch.tensor([r, r + 10]) for r in range(3)]
    after = [torch.tensor([33, 33]) for _ in range(3)]
    fig = show_ranks(before, after, title="all_reduce")
    left, right = fig.axes
    assert [t.get_text() for t in left.get_yticklabels()] == ["rank 0", "rank 1", "rank 2"]
    assert _texts(left) == ["0", "10", "1", "11", "2", "12"]
    assert _texts(right) == ["33"] * 6
    assert (left.get_title(), right.get_title()) == ("before", "after")
    assert fig._suptitle.get_text() == "all_reduce"


def test_a_value_keeps_its_colour_from_one_panel_to_the_other():
    fig = show_ranks([torch.tensor([1.0]), torch.tensor([5.0])], [torch.tensor([5.0])] * 2)
    left, right = fig.axes
    five_before = _cells(left)[1].get_facecolor()
    assert all(c.get_facecolor() == five_before for c in _cells(right))
    assert _cells(left)[0].get_facecolor() != five_before


def test_none_is_drawn_as_no_data_and_lists_as_chunks():
    chunks = [torch.zeros(2), torch.ones(2)]
    fig = show_ranks([torch.zeros(1), torch.zeros(1)], [chunks, None])
    right = fig.axes[1]
    assert "(no data)" in _texts(right)
    xs = sorted(c.get_x() for c in _cells(right))
    steps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    assert max(steps) > min(steps)  # a gap between the two chunks


def test_long_rows_are_coloured_but_not_annotated_and_2d_tensors_are_flattened():
    fig = show_ranks([torch.arange(100).reshape(10, 10)])
    assert len(_cells(fig.axes[0])) == 100
    assert _texts(fig.axes[0]) == []


def test_inside_a_process_group_it_gathers_and_rank_0_draws(tmp_path):
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        assert show_ranks(torch.tensor([7]), None, title="gather") is None
    finally:
        dist.destroy_process_group()
    (number,) = plt.get_fignums()  # left open for the launcher to send back
    left, right = plt.figure(number).axes
    assert _texts(left) == ["7"] and _texts(right) == ["(no data)"]


def _gather_to_rank_0_and_describe() -> list[str] | None:
    """Run on each rank: a gather's output exists only on rank 0 (None elsewhere)."""
    rank = dist.get_rank()
    after = [torch.tensor([0]), torch.tensor([1])] if rank == 0 else None
    show_ranks(torch.tensor([rank]), after, title="gather")
    if rank != 0:
        return None
    (number,) = plt.get_fignums()
    texts = [t.get_text() for ax in plt.figure(number).axes for t in ax.texts]
    plt.close("all")
    return texts


def test_on_two_ranks_a_rank_with_no_after_data_still_takes_part():
    from labsupport.runtime.launch import Cluster

    with Cluster(world_size=2, backend="gloo", timeout=30) as cluster:
        texts, nothing = cluster.run(_gather_to_rank_0_and_describe)
    assert texts == ["0", "1", "0", "1", "(no data)"] and nothing is None


def test_a_string_entry_is_drawn_as_a_note_in_place_of_data():
    fig = show_ranks([torch.zeros(1)] * 2, [torch.ones(1), "undefined"])
    assert "(undefined)" in _texts(fig.axes[1])
