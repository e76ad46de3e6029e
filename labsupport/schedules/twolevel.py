"""The two-level (hierarchical) all-reduce: reduce-scatter inside, all-reduce across, all-gather.

What HCCL runs across Atlas A2 servers (intra-server reduce-scatter,
inter-server all-reduce, intra-server all-gather) and what ASTRA-sim's
``localBWAware`` does on two dimensions. Across servers HCCL's level 1 runs
ring, H-D_R (recursive halving-doubling), NHR or NB (``HCCL_ALGO``): ``inter``
picks the ring or halving-doubling here.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.compact import ring_phase
from labsupport.schedules.halving import rabenseifner_all_reduce
from labsupport.schedules.model import Rotation, Schedule, ScheduleError, Step

#: The algorithms the hierarchical all-reduce can run inside a node.
INTRA = ("direct", "ring")
#: The algorithms it can run across the nodes (HCCL's level 1: ring, H-D_R).
INTER = ("ring", "halving_doubling")


def hierarchical_all_reduce(
    p: int, ranks_per_node: int, intra: str = "direct", inter: str = "ring"
) -> Schedule:
    """Two-level all-reduce on p ranks, ``ranks_per_node`` per node; node j is ranks j*k .. j*k+k-1.

    1. reduce-scatter inside each node: local rank l ends with piece l (1/k of
       the buffer) summed over its node;
    2. all-reduce of piece l across the nodes, among the ranks with local
       rank l (one all-reduce per local rank, all at once): on a ring
       (``inter="ring"``, 2(m-1) steps) or by halving-doubling
       (``inter="halving_doubling"``: Rabenseifner, nearest node first,
       2 lg m steps; HCCL's H-D_R, folded as MPICH does when m is not a power
       of two);
    3. all-gather inside each node.

    ``intra`` is the algorithm of phases 1 and 3. ``"direct"`` (the default,
    HCCL's Mesh, ASTRA-sim's ``direct``): one step each, every rank sending to
    the k-1 others at once, which uses every link of a fully connected node
    (HCCS inside an A2 server, NVSwitch). ``"ring"``: k-1 steps each on a ring,
    which uses one of each rank's k-1 links (NCCL and HCCL run several rings
    or channels at once to use them all).

    Per rank only 1/k of the buffer crosses the slow inter-node links. With
    m = p/k nodes and a ring across, the buffer is cut into p chunks; piece l
    is chunks ``l*m .. l*m + m-1`` (with halving-doubling, c chunks per piece,
    c the largest power of two <= m). Steps inside: 2 (direct) or 2(k-1)
    (ring); the ring phases are :class:`Rotation` rules, so 4096 ranks build in
    milliseconds.
    """
    k = ranks_per_node
    if p < 1 or k < 1 or p % k:
        raise ScheduleError(f"ranks_per_node={k} must divide the world size {p}")
    if intra not in INTRA:
        raise ValueError(f"intra must be one of {INTRA}, not {intra!r}")
    if inter not in INTER:
        raise ValueError(f"inter must be one of {INTER}, not {inter!r}")
    m = p // k
    r = np.arange(p)
    node, local = r // k, r % k
    if inter == "ring":
        c, across = m, ((node + 1) % m) * k + local  # same local rank on the next node
        middle = [
            *ring_phase(
                r, across, Rotation(base=(node - 1) % m, modulus=m, offset=local * m), True, m - 1
            ),
            *ring_phase(r, across, Rotation(base=node, modulus=m, offset=local * m), False, m - 1),
        ]
    else:
        c, middle = _halving_across(k, m)
    if intra == "ring":
        beside = node * k + (local + 1) % k  # next rank on the same node
        scatter = ring_phase(
            r, beside, Rotation(base=(local - 1) % k, modulus=k, count=c, scale=c), True, k - 1
        )
        gather = ring_phase(
            r, beside, Rotation(base=local, modulus=k, count=c, scale=c), False, k - 1
        )
    else:
        scatter, gather = _direct_pieces(p, k, c, reduce=True), _direct_pieces(p, k, c, False)
    steps = [*scatter, *middle, *gather]
    note = f"{m} node(s) of {k} rank(s), {intra} inside, {inter.replace('_', '-')} across"
    return Schedule("hierarchical_all_reduce", "all_reduce", p, k * c, tuple(steps), note=note)


def _halving_across(k: int, m: int) -> tuple[int, list[Step]]:
    """Rabenseifner on the m nodes, once per local rank l: node i's rank l plays rank i of it.

    Returns (c, steps): each piece is c chunks (Rabenseifner's own), local rank l's piece
    chunks ``l*c .. l*c + c-1``; the k copies of each step run at once.
    """
    inner = rabenseifner_all_reduce(m)
    c, local = inner.num_chunks, np.arange(k)
    steps = []
    for st in inner.steps:
        copies = np.repeat(local, len(st))  # copy l of every transfer
        src, dst = np.tile(st.src, k) * k + copies, np.tile(st.dst, k) * k + copies
        start, stop = np.tile(st.start, k) + copies * c, np.tile(st.stop, k) + copies * c
        steps.append(Step.columns(src, dst, start, stop, np.tile(st.reduce, k)))
    return c, steps


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
