"""The two-level (hierarchical) all-reduce: reduce-scatter inside, all-reduce across, all-gather.

What HCCL runs across Atlas A2 servers (intra-server reduce-scatter,
inter-server all-reduce, intra-server all-gather) and what ASTRA-sim's
``localBWAware`` does on two dimensions.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.compact import ring_phase
from labsupport.schedules.model import Rotation, Schedule, ScheduleError, Step

#: The algorithms the hierarchical all-reduce can run inside a node.
INTRA = ("direct", "ring")


def hierarchical_all_reduce(p: int, ranks_per_node: int, intra: str = "direct") -> Schedule:
    """Two-level all-reduce on p ranks, ``ranks_per_node`` per node; node j is ranks j*k .. j*k+k-1.

    1. reduce-scatter inside each node: local rank l ends with piece l (1/k of
       the buffer) summed over its node;
    2. all-reduce of piece l on a ring across the nodes, among the ranks with
       local rank l (one ring per local rank, all at once);
    3. all-gather inside each node.

    ``intra`` is the algorithm of phases 1 and 3. ``"direct"`` (the default,
    HCCL's Mesh, ASTRA-sim's ``direct``): one step each, every rank sending to
    the k-1 others at once, which uses every link of a fully connected node
    (HCCS inside an A2 server, NVSwitch). ``"ring"``: k-1 steps each on a ring,
    which uses one of each rank's k-1 links (NCCL and HCCL run several rings
    or channels at once to use them all).

    Per rank only 1/k of the buffer crosses the slow inter-node links. With
    m = p/k nodes the buffer is cut into p chunks; piece l is chunks
    ``l*m .. l*m + m-1``. Steps: 2 + 2(m-1) (direct) or 2(k-1) + 2(m-1) (ring);
    the ring phases are :class:`Rotation` rules, so 4096 ranks build in
    milliseconds.
    """
    k = ranks_per_node
    if p < 1 or k < 1 or p % k:
        raise ScheduleError(f"ranks_per_node={k} must divide the world size {p}")
    if intra not in INTRA:
        raise ValueError(f"intra must be one of {INTRA}, not {intra!r}")
    m = p // k
    r = np.arange(p)
    node, local = r // k, r % k
    across = ((node + 1) % m) * k + local  # same local rank on the next node
    if intra == "ring":
        beside = node * k + (local + 1) % k  # next rank on the same node
        scatter = ring_phase(
            r, beside, Rotation(base=(local - 1) % k, modulus=k, count=m, scale=m), True, k - 1
        )
        gather = ring_phase(
            r, beside, Rotation(base=local, modulus=k, count=m, scale=m), False, k - 1
        )
    else:
        scatter, gather = _direct_pieces(p, k, m, reduce=True), _direct_pieces(p, k, m, False)
    steps = [
        *scatter,
        *ring_phase(
            r, across, Rotation(base=(node - 1) % m, modulus=m, offset=local * m), True, m - 1
        ),
        *ring_phase(r, across, Rotation(base=node, modulus=m, offset=local * m), False, m - 1),
        *gather,
    ]
    note = f"{m} node(s) of {k} rank(s), {intra} inside"
    return Schedule("hierarchical_all_reduce", "all_reduce", p, p, tuple(steps), note=note)


def _direct_pieces(p: int, k: int, m: int, reduce: bool) -> list[Step]:
    """One step inside every node: each rank sends piece l (m chunks) to local rank l, or its own.

    Reduce-scatter (``reduce=True``): rank l' adds piece l into local rank l.
    All-gather: each rank copies its own piece to the others. In rounds
    j = 1 .. k-1, local rank l sends to local rank l + j.
    """
    if k == 1:
        return []
    r, j = np.tile(np.arange(p), k - 1), np.repeat(np.arange(1, k), p)
    node, local = r // k, r % k
    peer = (local + j) % k
    piece = peer if reduce else local
    return [Step.columns(r, node * k + peer, piece * m, piece * m + m, reduce)]
