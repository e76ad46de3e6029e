"""Graders for notebook 05's exercises: a ring that stays on its rails, and a speed-up.

* :func:`check_ring_order` - your ``ring_order(node_of, local_of)`` returns the
  order in which a ring visits the ranks, given the node each rank sits on and
  its NPU index there. The grader lays that ring on a two-level network with
  rail-optimised wiring (NPU i's NIC reaches only NPU i of the other nodes, as
  in ASTRA-sim's multi-dimensional networks and many GPU clusters), simulates
  it with :func:`labsupport.topology.simulate_on_topology` (with congestion), and compares
  it with the best ring: one whose every hop between nodes stays on its rail.
  A hop that changes rail first crosses its own node, and every step of the
  ring waits for it.
* :func:`check_hierarchical_speedup` - your predicted ratio (flat ring time /
  hierarchical time) for a given network, against the simulator, within 10 %.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from labsupport.runtime.check import FAIL, PASS, CheckResult, report
from labsupport.runtime.check.messages import not_implemented
from labsupport.runtime.language import _
from labsupport.schedules import Schedule, hierarchical_all_reduce, ring_all_reduce
from labsupport.topology import Topology, simulate_on_topology, two_level

#: The network the ring-order exercise is graded on: (latency s, bytes/s) inside and across nodes.
INTRA, INTER = (2e-6, 50e9), (10e-6, 5e9)
NBYTES = 64 * 2**20


def node_layouts() -> list[tuple[list[int], list[int]]]:
    """The placements the grader tries: (node of each rank, NPU index of each rank there)."""
    rng = np.random.default_rng(5)
    shuffled = rng.permutation(np.repeat(np.arange(3), 4)).tolist()
    layouts = [
        [r % 2 for r in range(8)],  # ranks dealt to 2 nodes in turn (a cyclic placement)
        [r % 4 for r in range(8)],  # 4 nodes of 2, cyclic
        [r // 4 for r in range(8)],  # already in blocks
        shuffled,  # 3 nodes of 4, any order
    ]
    out = []
    for node_of in layouts:
        slot = [node_of[:r].count(node_of[r]) for r in range(len(node_of))]
        out.append((node_of, slot))
    npus = [int(i) for i in rng.permutation(4)]  # in the shuffled layout, NPUs in any order too
    out[-1] = (shuffled, [npus[s] for s in out[-1][1]])
    return out


def ring_in_order(order: Sequence[int], npu_of: Sequence[int]) -> Schedule:
    """A ring all-reduce that visits the ranks in ``order``; rank r runs on NPU ``npu_of[r]``."""
    ring = ring_all_reduce(len(order))
    where = np.asarray(npu_of)[np.asarray(order)]  # ring position i -> NPU
    steps = tuple(st.mapped(where) for st in ring.steps)
    return Schedule("ring_in_order", "all_reduce", ring.world_size, ring.num_chunks, steps)


def placement(
    node_of: Sequence[int], local_of: Sequence[int] | None = None, uplink: str = "rail"
) -> tuple[Topology, list[int]]:
    """The two-level network of a placement, and the NPU of each rank (node-major NPU ids).

    ``local_of[r]`` is rank r's NPU index on its node (default: ranks fill their
    node in rank order). ``uplink="rail"``: NPU i reaches NPU i of other nodes.
    """
    node_of = list(node_of)
    nodes = max(node_of) + 1
    per_node = max(node_of.count(n) for n in range(nodes))
    if any(node_of.count(n) != per_node for n in range(nodes)):
        raise ValueError("every node must hold the same number of ranks")
    if local_of is None:
        local_of = [node_of[:r].count(node_of[r]) for r in range(len(node_of))]
    npu_of = [node_of[r] * per_node + local_of[r] for r in range(len(node_of))]  # dim 0 fastest
    if sorted(npu_of) != list(range(len(node_of))):
        raise ValueError("local_of must give each rank of a node a different NPU index")
    topo = two_level(nodes, per_node, INTRA, INTER, f"{nodes} nodes of {per_node}", uplink)
    return topo, npu_of


def crossings(order: Sequence[int], node_of: Sequence[int]) -> int:
    """How many hops of the ring (including the one back to the start) go between nodes."""
    return sum(node_of[a] != node_of[b] for a, b in zip(order, [*order[1:], order[0]], strict=True))


def off_rail(order: Sequence[int], node_of: Sequence[int], local_of: Sequence[int]) -> list:
    """The hops (a, b) of the ring that go between nodes and change NPU index (rail)."""
    hops = zip(order, [*order[1:], order[0]], strict=True)
    return [(a, b) for a, b in hops if node_of[a] != node_of[b] and local_of[a] != local_of[b]]


def rail_ring(node_of: Sequence[int], local_of: Sequence[int]) -> list[int]:
    """A ring whose hops between nodes all stay on their rail (the grader's reference).

    An even number of NPUs per node: walk rail 0 through every node, step to
    rail 1 inside the last node, walk it back, and so on (ending inside node 0).
    An odd number (3 or more): visit each node whole, entering and leaving it on
    the rail the next node is entered on.
    """
    nodes, per = max(node_of) + 1, node_of.count(node_of[0])
    rank = {(node_of[r], local_of[r]): r for r in range(len(node_of))}
    if per == 1 or nodes == 1:
        return sorted(range(len(node_of)), key=lambda r: (node_of[r], local_of[r]))
    if per % 2 == 0:
        walk = [
            (n if lane % 2 == 0 else nodes - 1 - n, lane)
            for lane in range(per)
            for n in range(nodes)
        ]
        return [rank[key] for key in walk]
    enter = [j % 2 for j in range(nodes)]
    if nodes % 2:
        enter[-1] = 2
    order = []
    for j in range(nodes):
        a, b = enter[j], enter[(j + 1) % nodes]
        lanes = [a, *(x for x in range(per) if x not in (a, b)), b]
        order += [rank[(j, lane)] for lane in lanes]
    return order


def _grade_one(order: object, node_of: list[int], local_of: list[int]) -> str | None:
    """None if ``order`` is a best ring for this placement, else what is wrong."""
    p = len(node_of)
    if not isinstance(order, list | tuple | np.ndarray) or sorted(map(int, order)) != list(
        range(p)
    ):
        problem = _(
            "ring_order({node_of}, {local_of}) must list every rank 0..{last} once, got {order}"
        )
        return problem.format(node_of=node_of, local_of=local_of, last=p - 1, order=repr(order))
    order = [int(r) for r in order]
    topo, npu_of = placement(node_of, local_of)
    t_yours = simulate_on_topology(ring_in_order(order, npu_of), topo, NBYTES, congestion=True).time
    best = rail_ring(node_of, local_of)
    t_best = simulate_on_topology(ring_in_order(best, npu_of), topo, NBYTES, congestion=True).time
    if t_yours > t_best * (1 + 1e-9):
        bad = off_rail(order, node_of, local_of)
        where = ""
        if bad:
            a, b = bad[0]
            where = " " + _(
                "{count} of its hops between nodes change rail, e.g. rank {a} (node "
                "{node_a}, NPU {npu_a}) -> rank {b} (node {node_b}, NPU "
                "{npu_b}), which first crosses node {node_a} to its NPU {npu_b}."
            ).format(
                count=len(bad),
                a=a,
                node_a=node_of[a],
                npu_a=local_of[a],
                b=b,
                node_b=node_of[b],
                npu_b=local_of[b],
            )
        slower = _(
            "for ranks on nodes {node_of} at NPUs {local_of}, your ring {order} takes "
            "{yours:.2f} ms in the simulator; {best} takes {best_time:.2f} ms."
        ).format(
            node_of=node_of,
            local_of=local_of,
            order=order,
            yours=t_yours * 1e3,
            best=best,
            best_time=t_best * 1e3,
        )
        hint = _(
            "Hint: every step of a ring waits for its slowest hop. On rail-optimised wiring, "
            "which hops between nodes are as cheap as they can be?"
        )
        return slower + where + "\n   " + hint
    return None


def check_ring_order(ring_order: Callable[[list[int], list[int]], Sequence[int]]) -> CheckResult:
    """Grade ``ring_order(node_of, local_of)`` on several placements, with the simulator."""
    name = "ring_order"
    layouts = node_layouts()
    for node_of, local_of in layouts:
        try:
            order = ring_order(list(node_of), list(local_of))
        except NotImplementedError:
            return not_implemented(name)
        except Exception as e:
            return report(
                False,
                f"{FAIL} "
                + _("{name}({node_of}, {local_of}) raised {error}: {exc}").format(
                    name=name, node_of=node_of, local_of=local_of, error=type(e).__name__, exc=e
                ),
            )
        problem = _grade_one(order, node_of, local_of)
        if problem:
            return report(False, f"{FAIL} {problem}")
    return report(
        True,
        f"{PASS} "
        + _(
            "{name}: on all {count} placements every hop of your ring between nodes "
            "stays on its rail, and the simulator agrees it is as fast as a ring can be there."
        ).format(name=name, count=len(layouts)),
    )


def hierarchical_speedup(
    nodes: int,
    per_node: int,
    nbytes: float,
    intra: tuple[float, float],
    inter: tuple[float, float],
    inside: str = "ring",
) -> float:
    """Flat ring time / hierarchical time on :func:`~labsupport.topology.two_level`, simulated.

    ``inside`` is the hierarchical all-reduce's algorithm inside a node: "ring" or
    "direct" (every link of the node's mesh at once).
    """
    topo = two_level(nodes, per_node, intra, inter)
    flat = simulate_on_topology(ring_all_reduce(nodes * per_node), topo, nbytes).time
    two = simulate_on_topology(
        hierarchical_all_reduce(nodes * per_node, per_node, inside), topo, nbytes
    )
    return flat / two.time


def check_hierarchical_speedup(
    predicted: float | Callable[[], float],
    nodes: int,
    per_node: int,
    nbytes: float,
    intra: tuple[float, float],
    inter: tuple[float, float],
    rtol: float = 0.10,
    inside: str = "ring",
) -> CheckResult:
    """Compare a predicted speed-up of the hierarchical all-reduce with the simulator's."""
    name = _("Your predicted speed-up")
    if callable(predicted):
        try:
            predicted = predicted()
        except NotImplementedError:
            return not_implemented(name)
    try:
        value = float(predicted)
    except (TypeError, ValueError):
        return report(
            False,
            f"{FAIL} "
            + _("{name} must be a number, got {value}").format(name=name, value=repr(predicted)),
        )
    model = hierarchical_speedup(nodes, per_node, nbytes, intra, inter, inside)
    if abs(value - model) <= rtol * model:
        return report(
            True,
            f"{PASS} "
            + _("{name} {value:.2f}x is within {rtol:.0%} of the model's {model:.2f}x.").format(
                name=name, value=value, rtol=rtol, model=model
            ),
        )
    hint = _(
        "Hint: each step of the flat ring waits for its hop between nodes; on this wiring "
        "that message first crosses its own node (NPU g-1 to NPU 0), then the link between "
        "nodes. The hierarchical one moves n/g-byte pieces inside nodes and n/(g·m) across."
    )
    return report(
        False,
        f"{FAIL} "
        + _("{name} {value:.2f}x; the model says {model:.2f}x.").format(
            name=name, value=value, model=model
        )
        + "\n   "
        + hint,
    )
