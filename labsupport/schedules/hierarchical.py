"""Two-level (hierarchical) all-reduce: reduce-scatter in each node, all-reduce across, all-gather.

This is what HCCL runs on multi-server Ascend systems (intra-server
reduce-scatter, inter-server all-reduce, intra-server all-gather) and what
ASTRA-sim calls ``localBWAware``. With k ranks per node and m nodes:

1. each node runs a ring reduce-scatter on k chunks: local rank i ends with
   chunk i summed over its node;
2. the m ranks with the same local index i (one per node) run a ring
   all-reduce on chunk i, so only 1/k of the buffer crosses each NIC;
3. each node runs a ring all-gather of the k chunks.

Ranks ``j*k .. j*k + k-1`` are node j. The buffer is cut into k·m chunks, so
that phase 2 can cut each node-level chunk into m pieces.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.builders import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from labsupport.schedules.model import Schedule, ScheduleError, Step


def _merge(steps: list[Step]) -> Step:
    """One step made of several steps' transfers (they run at the same time)."""
    cols = [np.concatenate([getattr(s, f) for s in steps]) for f in ("src", "dst", "start", "stop")]
    return Step(*cols, np.concatenate([s.reduce for s in steps]))


def _lift(step: Step, ranks: np.ndarray, scale: int, offset: int) -> Step:
    """``step`` with rank r renamed ranks[r] and chunk c made chunks [offset + c*scale, +scale)."""
    return Step(
        ranks[step.src],
        ranks[step.dst],
        step.start * scale + offset,
        step.stop * scale + offset,
        step.reduce,
    )


def hierarchical_all_reduce(p: int, ranks_per_node: int) -> Schedule:
    """The two-level all-reduce on p ranks, ``ranks_per_node`` per node (see the module doc)."""
    k = ranks_per_node
    if p < 1 or k < 1 or p % k:
        raise ScheduleError(f"ranks_per_node={k} must divide the world size {p}")
    m = p // k
    nodes = [np.arange(j * k, (j + 1) * k) for j in range(m)]
    columns = [np.arange(i, p, k) for i in range(k)]  # rank i of every node
    steps: list[Step] = []
    for st in ring_reduce_scatter(k).steps:
        steps.append(_merge([_lift(st, nodes[j], m, 0) for j in range(m)]))
    for st in ring_all_reduce(m).steps:
        steps.append(_merge([_lift(st, columns[i], 1, i * m) for i in range(k)]))
    for st in ring_all_gather(k).steps:
        steps.append(_merge([_lift(st, nodes[j], m, 0) for j in range(m)]))
    note = f"{m} node(s) of {k} rank(s)"
    return Schedule("hierarchical_all_reduce", "all_reduce", p, k * m, tuple(steps), note=note)
