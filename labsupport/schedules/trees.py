"""NCCL's double binary tree: two binary trees, each rank a leaf in one and interior in the other.

Start at :func:`double_binary_tree_all_reduce`; the trees are :func:`double_binary_tree`,
the schedule's steps :func:`_phase`.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.model import Schedule, ScheduleError, Step

# Why two trees. A single binary tree wastes bandwidth: its leaves (half the ranks) only
# ever send, while each interior rank receives two streams and sends three. NCCL 2.4
# (NVIDIA blog, "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019) runs
# *two* binary trees over the same ranks, each carrying half of the buffer, built so that
# a rank that is interior in one tree is a leaf in the other (Sanders, Speck & Träff,
# "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel
# Computing 35(12), 2009). Every rank then sends and receives about as much as in a ring:
# full bandwidth, with a latency that grows with lg p.
#
# Not ASTRA-sim's ``doubleBinaryTree``, which sends whole chunks alternately down one tree
# or the other (``DoubleBinaryTreeAllReduce.cc``), nor NCCL's exact timing (NCCL overlaps
# the reduction and the broadcast, over several channels, on a tree of nodes with a chain
# inside each node).


def binary_tree(p: int) -> np.ndarray:
    """Parent of each rank in NCCL's binary tree on p ranks (rank 0 is the root: -1).

    As ``ncclGetBtree``: the parent of a rank whose lowest set bit is b is
    ``(r ^ b) | (b << 1)``, or ``r ^ b`` if that is out of range.
    """
    parent = np.full(p, -1, dtype=np.int64)
    for r in range(1, p):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parent[r] = up if up < p else r ^ bit
    return parent


def double_binary_tree(p: int) -> tuple[np.ndarray, np.ndarray]:
    """The parents of each rank in NCCL's two trees (``ncclGetDtree``): (tree A, tree B).

    NCCL's (``ncclGetBtree`` and ``ncclGetDtree``, ``src/graph/trees.cc``): tree A is an
    in-order binary tree rooted at rank 0 (odd ranks are its leaves, rank 0 has a single
    child); tree B is A mirrored (r -> p-1-r) when p is even, or A shifted by one rank
    when p is odd.
    """
    a = binary_tree(p)
    r = np.arange(p)
    if p % 2:  # shift by one rank: rank r plays the part of rank r-1 in tree A
        up = a[(r - 1) % p]
        b = np.where(up < 0, -1, (up + 1) % p)
    else:  # mirror: rank r plays the part of rank p-1-r
        up = a[p - 1 - r]
        b = np.where(up < 0, -1, p - 1 - up)
    return a, b


def _edges(p: int) -> list[tuple[int, int, int]]:
    """Every (child, parent, tree) of the two trees."""
    out = []
    for tree, parent in enumerate(double_binary_tree(p)):
        out += [(c, int(parent[c]), tree) for c in range(p) if parent[c] >= 0]
    return out


def edge_colours(p: int) -> dict[tuple[int, int, int], int]:
    """A colour (0 or 1) per tree edge such that no rank sends, or receives, twice in a colour.

    The edges join a child (as sender, going up) to a parent (as receiver); each
    rank has at most two parents and at most two children, so the graph of
    senders and receivers is a union of paths and even cycles, coloured here by
    walking each one and alternating.
    """
    edges = _edges(p)
    at: dict[tuple[str, int], list[int]] = {}
    for i, (c, u, _) in enumerate(edges):
        at.setdefault(("send", c), []).append(i)
        at.setdefault(("recv", u), []).append(i)
    colour: dict[int, int] = {}

    def walk(i: int, side: tuple[str, int], c: int) -> None:
        while i not in colour:  # follow the path through the other end of each edge
            colour[i] = c
            child, parent, _ = edges[i]
            side = ("recv", parent) if side == ("send", child) else ("send", child)
            nxt = [j for j in at[side] if j != i and j not in colour]
            if not nxt:
                return
            i, c = nxt[0], 1 - c

    ends = [i for key, ids in at.items() if len(ids) == 1 for i in ids]
    for i in [*ends, *range(len(edges))]:  # paths from an end first, then the cycles
        if i not in colour:
            child, parent, _ = edges[i]
            lonely = ("send", child) if len(at[("send", child)]) == 1 else ("recv", parent)
            walk(i, lonely, 0)
    return {edges[i]: c for i, c in colour.items()}


def double_binary_tree_all_reduce(p: int, blocks: int = 4) -> Schedule:
    """All-reduce over NCCL's two binary trees, each carrying half the buffer in ``blocks`` blocks.

    The buffer is cut into ``2 * blocks`` chunks: chunks ``0 .. blocks-1`` go
    up and down tree A, the others tree B. A rank sends at most one message and
    receives at most one in each step. For p = 2**k >= 4 that takes
    4·blocks + 4 lg p - 6 steps of one block (n / (2·blocks) bytes).
    """
    if p < 1 or blocks < 1:
        raise ScheduleError(f"need p >= 1 and blocks >= 1, got p={p}, blocks={blocks}")
    name = "double_binary_tree_all_reduce"
    if p == 1:
        return Schedule(name, "all_reduce", 1, 2 * blocks, ())
    # Each half is cut into ``blocks`` pieces that flow up the tree (reduce, adding at each
    # rank) and then down it (broadcast), pipelined: a rank forwards block j while block
    # j+1 is still coming. A rank may send one message and receive one per step (one port,
    # full duplex), the model of Sanders et al.; they colour the edges of the two trees
    # with two colours so that a rank's two parents, and its two children, never share a
    # colour, and use an edge in the steps of its colour. Here the same colouring sets the
    # priorities of a greedy schedule (_phase). The reduction runs first, then the broadcast.
    colour = edge_colours(p)
    parents = double_binary_tree(p)
    children = [[[c for c in range(p) if par[c] == u] for u in range(p)] for par in parents]
    up = [(c, u, t, colour[(c, u, t)]) for (c, u, t) in colour]
    steps = _phase(up, blocks, lambda t, c: children[t][c], reduce=True)
    down = [(u, c, t, k) for (c, u, t, k) in up]
    root = {t: int(np.flatnonzero(par < 0)[0]) for t, par in enumerate(parents)}
    steps += _phase(down, blocks, lambda t, r: [] if r == root[t] else [parents[t][r]], False)
    note = f"2 trees x {blocks} block(s); a rank sends one and receives one message per step"
    return Schedule(name, "all_reduce", p, 2 * blocks, tuple(steps), note=note)


def _phase(edges: list, blocks: int, feeders, reduce: bool) -> list[Step]:  # noqa: ANN001
    """Pipelined steps over ``edges`` (src, dst, tree, colour) until each edge sent every block.

    A rank has block j of tree t once every rank in ``feeders(t, rank)`` has
    delivered block j to it (no feeders: it has every block from the start). In
    each step, an edge whose sender has its next block sends it, unless its
    sender already sends or its receiver already receives in that step; edges of
    the step's colour go first, so the steady state is the two-colour pattern,
    and no rank waits for its colour while both its ports are free.
    """
    sent = [0] * len(edges)  # blocks edge i has delivered
    got: dict[tuple[int, int, int], int] = {}  # (tree, from, to) -> blocks delivered

    def have(t: int, r: int) -> int:
        return min((got.get((t, f, r), 0) for f in feeders(t, r)), default=blocks)

    steps: list[Step] = []
    while min(sent) < blocks:
        ready = [i for i, (src, _, t, _) in enumerate(edges) if sent[i] < have(t, src)]
        ready.sort(key=lambda i: (edges[i][3] != len(steps) % 2, sent[i], i))
        sending, receiving, moves = set(), set(), []
        for i in ready:
            src, dst, _, _ = edges[i]
            if src not in sending and dst not in receiving:
                sending.add(src)
                receiving.add(dst)
                moves.append(i)
        if not moves:
            raise ScheduleError("double binary tree: no progress (a bug in the trees)")
        for i in moves:  # what arrives in this step can be sent on from the next one
            src, dst, t, _ = edges[i]
            got[(t, src, dst)] = sent[i] = sent[i] + 1
        src, dst, tree = (np.array([edges[i][j] for i in moves]) for j in range(3))
        chunk = tree * blocks + np.array([sent[i] - 1 for i in moves])
        steps.append(Step.columns(src, dst, chunk, chunk + 1, reduce))
    return steps
