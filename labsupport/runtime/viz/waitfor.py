"""A deadlock as a picture: who waits for whom, read from the stacks of hung ranks.

When a cell hangs, the launcher raises ``CollectiveTimeout`` with each rank's Python
stack (``err.stacks``). Each stack ends in the call the rank is blocked in
(``recv``, ``send``, ``all_reduce`` ...) below the line of your code that made it.
:func:`blocked_calls` reads that line and works out the peer (``src=`` or ``dst=``)
from ``rank`` and ``world_size``; :func:`find_cycle` follows "rank a waits for rank
b" until it comes back; :func:`draw_wait_for` draws the ranks on a circle with an
arrow from each rank to the rank it waits for, the cycle in red::

    err = sys.last_value                      # the CollectiveTimeout a cell just raised
    draw_wait_for(err.stacks)

The peer can only be worked out when the line spells it from ``rank`` and
``world_size`` (``src=(rank - 1) % world_size``); otherwise the rank's arrow is left
out and its label says what it waits in.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labsupport.runtime.launch.frames import is_library, parse_frames

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_PEER_KEYWORDS = ("src", "dst", "peer", "group_src", "group_dst")
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


@dataclass(frozen=True)
class Wait:
    """Where one rank is blocked: the call (``recv``), your line, and the peer if known."""

    rank: int
    call: str
    line: str
    peer: int | None


def _evaluate(node: ast.expr, names: Mapping[str, int]) -> int:
    """An integer expression of ``rank`` and ``world_size`` (+ - * // %), nothing else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, names), _evaluate(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, names)
    raise ValueError(f"cannot evaluate {ast.unparse(node)!r} from rank and world_size")


def peer_of(line: str, call: str, rank: int, world_size: int) -> int | None:
    """The rank that ``line`` (a call to ``call``) sends to or receives from, if it says."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    names = {"rank": rank, "world_size": world_size}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", None))
        if name not in (call, f"i{call}"):
            continue
        exprs = [k.value for k in node.keywords if k.arg in _PEER_KEYWORDS] + node.args[1:2]
        for expr in exprs:
            try:
                return _evaluate(expr, names) % world_size
            except (ValueError, ZeroDivisionError):
                return None
    return None


def blocked_calls(stacks: Mapping[int, str], world_size: int | None = None) -> dict[int, Wait]:
    """For each rank's stack: the library call it is blocked in, your line, and its peer."""
    size = world_size or (max(stacks) + 1 if stacks else 0)
    waits = {}
    for rank, stack in sorted(stacks.items()):
        frames = parse_frames(stack)
        mine = [i for i, f in enumerate(frames) if not is_library(f)]
        if not mine:
            continue
        user = frames[mine[-1]]
        inner = frames[mine[-1] + 1] if mine[-1] + 1 < len(frames) else user
        line = user.line or ""
        call = inner.name
        waits[rank] = Wait(rank, call, line, peer_of(line, call, rank, size))
    return waits


def find_cycle(waits: Mapping[int, Wait]) -> list[int]:
    """A cycle of ranks each waiting for the next (``[0, 3, 2, 1]``), or ``[]`` if none."""
    for start in sorted(waits):
        path, rank = [], start
        while rank in waits and rank not in path:
            path.append(rank)
            rank = waits[rank].peer
            if rank is None:
                break
        if rank is not None and rank in path:
            return path[path.index(rank) :]
    return []


def draw_wait_for(stacks: Mapping[int, str], world_size: int | None = None) -> Figure:
    """Ranks on a circle, an arrow from each blocked rank to the rank it waits for; returns
    the Figure. A cycle of arrows (drawn in red) is a deadlock: nobody can go first."""
    import matplotlib.pyplot as plt

    waits = blocked_calls(stacks, world_size)
    size = world_size or (max(stacks) + 1 if stacks else 0)
    cycle = find_cycle(waits)
    on_cycle = {(a, cycle[(i + 1) % len(cycle)]) for i, a in enumerate(cycle)}
    where = {
        r: (math.sin(2 * math.pi * r / size), math.cos(2 * math.pi * r / size)) for r in range(size)
    }
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    for wait in waits.values():
        if wait.peer is None or wait.peer == wait.rank:
            continue
        red = (wait.rank, wait.peer) in on_cycle
        ax.annotate(
            "",
            xy=where[wait.peer],
            xytext=where[wait.rank],
            arrowprops={
                "arrowstyle": "-|>",
                "color": "#cf222e" if red else "#57606a",
                "lw": 2,
                "shrinkA": 30,
                "shrinkB": 30,
                "connectionstyle": "arc3,rad=0.15",
            },
        )
    for rank, (x, y) in where.items():
        wait = waits.get(rank)
        ax.scatter([x], [y], s=2600, color="#ddf4ff" if wait else "#eeeeee", edgecolor="black")
        ax.text(x, y, f"rank {rank}", ha="center", va="center", fontsize=9, weight="bold")
        label = "not blocked" if wait is None else f"in {wait.call}"
        if wait is not None and wait.peer is not None:
            label += f"\nwaits for {wait.peer}"
        side = "center" if abs(x) < 0.3 else ("left" if x > 0 else "right")
        ax.text(1.45 * x, 1.65 * y, label, ha=side, va="center", fontsize=8)
    if cycle:
        chain = " → ".join(map(str, [*cycle, cycle[0]]))
        title = f"wait-for cycle {chain}: a deadlock"
    else:
        title = "no wait-for cycle among the blocked ranks"
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-2.3, 2.3)
    ax.set_ylim(-1.9, 1.9)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
