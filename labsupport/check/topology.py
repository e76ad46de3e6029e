"""Graders for notebook 05's exercises: a ring order that stays inside nodes, and a speed-up.

* :func:`check_ring_order` - your ``ring_order(node_of)`` returns the order in
  which a ring visits the ranks, given the node each rank sits on. The grader
  lays that ring on a two-level network whose nodes each have one inter-node
  link, simulates it with :func:`labsupport.topology.simulate` (with
  congestion: messages that share a link wait for each other), and compares
  it with the best possible order: the ring must cross between nodes no more
  often than it has to.
* :func:`check_hierarchical_speedup` - your predicted ratio (flat ring time /
  hierarchical time) for a given network, against the simulator, within 10 %.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from labsupport.check import FAIL, PASS, CheckResult, report
from labsupport.check.messages import _not_implemented
from labsupport.schedules import Schedule, hierarchical_all_reduce, ring_all_reduce
from labsupport.topology import Topology, simulate, two_level

#: The network the ring-order exercise is graded on: (latency s, bytes/s) inside and across nodes.
INTRA, INTER = (2e-6, 50e9), (10e-6, 5e9)
NBYTES = 64 * 2**20


def node_layouts() -> list[list[int]]:
    """The placements the grader tries: the node of each rank (cyclic, blocked, shuffled)."""
    shuffled = np.random.default_rng(5).permutation(np.repeat(np.arange(3), 4)).tolist()
    return [
        [r % 2 for r in range(8)],  # ranks dealt to 2 nodes in turn (a cyclic placement)
        [r % 4 for r in range(8)],  # 4 nodes of 2, cyclic
        [r // 4 for r in range(8)],  # already in blocks
        shuffled,  # 3 nodes of 4, any order
    ]


def ring_in_order(order: Sequence[int], npu_of: Sequence[int]) -> Schedule:
    """A ring all-reduce that visits the ranks in ``order``; rank r runs on NPU ``npu_of[r]``."""
    ring = ring_all_reduce(len(order))
    where = np.asarray(npu_of)[np.asarray(order)]  # ring position i -> NPU
    steps = tuple(st.mapped(where) for st in ring.steps)
    return Schedule("ring_in_order", "all_reduce", ring.world_size, ring.num_chunks, steps)


def placement(node_of: Sequence[int]) -> tuple[Topology, list[int]]:
    """The two-level network of a placement, and the NPU of each rank (node-major NPU ids)."""
    nodes = max(node_of) + 1
    per_node = max(node_of.count(n) for n in range(nodes))
    if any(node_of.count(n) != per_node for n in range(nodes)):
        raise ValueError("every node must hold the same number of ranks")
    slot = [sum(1 for m in node_of[:r] if m == node_of[r]) for r in range(len(node_of))]
    npu_of = [node_of[r] * per_node + slot[r] for r in range(len(node_of))]  # dim 0 fastest
    topo = two_level(nodes, per_node, INTRA, INTER, f"{nodes} nodes of {per_node}", "shared")
    return topo, npu_of


def crossings(order: Sequence[int], node_of: Sequence[int]) -> int:
    """How many hops of the ring (including the one back to the start) go between nodes."""
    return sum(node_of[a] != node_of[b] for a, b in zip(order, [*order[1:], order[0]], strict=True))


def _grade_one(order: object, node_of: list[int]) -> str | None:
    """None if ``order`` is a best ring for this placement, else what is wrong."""
    p = len(node_of)
    if not isinstance(order, list | tuple | np.ndarray) or sorted(map(int, order)) != list(
        range(p)
    ):
        return f"ring_order({node_of}) must list every rank 0..{p - 1} once, got {order!r}"
    order = [int(r) for r in order]
    topo, npu_of = placement(node_of)
    nodes = max(node_of) + 1
    best = sorted(range(p), key=lambda r: node_of[r])
    t_yours = simulate(ring_in_order(order, npu_of), topo, NBYTES, congestion=True).time
    t_best = simulate(ring_in_order(best, npu_of), topo, NBYTES, congestion=True).time
    if t_yours > t_best * (1 + 1e-9):
        return (
            f"for ranks on nodes {node_of}, your ring {order} crosses between nodes "
            f"{crossings(order, node_of)} times and takes {t_yours * 1e3:.2f} ms in the "
            f"simulator; a ring that crosses only {nodes if nodes > 1 else 0} times takes "
            f"{t_best * 1e3:.2f} ms. Hint: visit all the ranks of one node before moving on."
        )
    return None


def check_ring_order(ring_order: Callable[[list[int]], Sequence[int]]) -> CheckResult:
    """Grade ``ring_order(node_of)`` on several placements, with the simulator."""
    name = "ring_order"
    layouts = node_layouts()
    for node_of in layouts:
        try:
            order = ring_order(list(node_of))
        except NotImplementedError:
            return _not_implemented(name)
        except Exception as e:  # noqa: BLE001 - any error is the learner's to read
            return report(False, f"{FAIL} {name}({node_of}) raised {type(e).__name__}: {e}")
        problem = _grade_one(order, node_of)
        if problem:
            return report(False, f"{FAIL} {problem}")
    return report(
        True,
        f"{PASS} {name}: on all {len(layouts)} placements your ring crosses between nodes "
        "as rarely as possible (once per node), and the simulator agrees it is the fastest.",
    )


def hierarchical_speedup(
    nodes: int,
    per_node: int,
    nbytes: float,
    intra: tuple[float, float],
    inter: tuple[float, float],
) -> float:
    """Flat ring time / hierarchical time on :func:`~labsupport.topology.two_level`, simulated."""
    topo = two_level(nodes, per_node, intra, inter)
    flat = simulate(ring_all_reduce(nodes * per_node), topo, nbytes).time
    two = simulate(hierarchical_all_reduce(nodes * per_node, per_node), topo, nbytes).time
    return flat / two


def check_hierarchical_speedup(
    predicted: float | Callable[[], float],
    nodes: int,
    per_node: int,
    nbytes: float,
    intra: tuple[float, float],
    inter: tuple[float, float],
    rtol: float = 0.10,
) -> CheckResult:
    """Compare a predicted speed-up of the hierarchical all-reduce with the simulator's."""
    name = "Your predicted speed-up"
    if callable(predicted):
        try:
            predicted = predicted()
        except NotImplementedError:
            return _not_implemented(name)
    try:
        value = float(predicted)
    except (TypeError, ValueError):
        return report(False, f"{FAIL} {name} must be a number, got {predicted!r}")
    model = hierarchical_speedup(nodes, per_node, nbytes, intra, inter)
    if abs(value - model) <= rtol * model:
        return report(True, f"{PASS} {name} {value:.2f}x is within {rtol:.0%} of the model's "
                            f"{model:.2f}x.")  # fmt: skip
    hint = (
        " Hint: in the flat ring every step waits for a message that crosses nodes "
        "(α₁ + α₂ + n/p·(β₁ + β₂)); the hierarchical one sends n/g inside nodes and "
        "only n/(g·m) across them."
    )
    return report(False, f"{FAIL} {name} {value:.2f}x; the model says {model:.2f}x.{hint}")
