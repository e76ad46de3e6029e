"""Process groups as pictures: the ranks of a multi-node job as a node × local-rank grid.

Rank ``r`` of a job with ``per_node`` ranks per node sits on node ``r // per_node`` at
local rank ``r % per_node``: one row per node, one column per local rank. A layout
of groups (a list of rank lists) colours each group's cells alike, so intra-node
groups show as rows and inter-node groups as columns, and a group that does not
cross nodes (``[0, 1]`` on 2 nodes of 4) shows as two cells of one row::

    draw_groups(2, 4, {"intra-node": [[0, 1, 2, 3], [4, 5, 6, 7]],
                       "inter-node": [[0, 4], [1, 5], [2, 6], [3, 7]]})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def unique_groups(groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """Each distinct group once, sorted, in order of first appearance (e.g. what every
    rank reported about the group it is in)."""
    seen: list[list[int]] = []
    for group in groups:
        ranks = sorted(int(r) for r in group)
        if ranks not in seen:
            seen.append(ranks)
    return seen


def draw_groups(
    nodes: int, per_node: int, layouts: Mapping[str, Sequence[Sequence[int]]]
) -> Figure:
    """One panel per named layout: the node × local-rank grid, each group in its colour
    (ranks in no group are white). Returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if nodes < 1 or per_node < 1:
        raise ValueError(f"need at least 1 node and 1 rank per node, got {nodes} x {per_node}")
    size = nodes * per_node
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(0.9 * per_node * len(layouts) + 1, 0.8 * nodes + 1.1)
    )
    axes = [axes] if len(layouts) == 1 else list(axes)
    for ax, (title, groups) in zip(axes, layouts.items(), strict=True):
        colour_of = {}
        for index, group in enumerate(unique_groups(groups)):
            for r in group:
                if not 0 <= r < size:
                    raise ValueError(f"rank {r} is not in a job of {nodes} x {per_node} ranks")
                colour_of[r] = _COLOURS[index % len(_COLOURS)]
        for r in range(size):
            node, local = divmod(r, per_node)
            ax.add_patch(
                Rectangle(
                    (local, node), 1, 1, facecolor=colour_of.get(r, "white"), edgecolor="black"
                )
            )
            text_colour = "white" if r in colour_of else "black"
            ax.text(local + 0.5, node + 0.5, str(r), ha="center", va="center", color=text_colour)
        ax.set_xlim(0, per_node)
        ax.set_ylim(nodes, 0)
        ax.set_xticks([c + 0.5 for c in range(per_node)], [str(c) for c in range(per_node)])
        ax.set_yticks([n + 0.5 for n in range(nodes)], [f"node {n}" for n in range(nodes)])
        ax.set_xlabel("local rank")
        ax.tick_params(length=0)
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=10)
        for spine in ax.spines.values():
            spine.set_visible(False)
    fig.tight_layout()
    return fig
