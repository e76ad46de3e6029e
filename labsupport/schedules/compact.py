"""The fast representation of the ring, for thousands of ranks (notebook 05):
skip on a first reading.

Read :mod:`~labsupport.schedules.ring` instead; this module builds the same
schedules. There the rule is run one transfer at a time: at step s of the
reduce-scatter rank r adds chunk (r - s - 1) % p into rank r + 1; at step s of
the all-gather rank r copies chunk (r - s) % p to rank r + 1. Here it is not.
The p - 1 steps of a phase differ only by s, so they share one ``src`` array,
one ``dst`` array and one :class:`~labsupport.schedules.model.Rotation` (the
chunk of transfer r is ``(base[r] + shift) % p``, with shift = -s); each step
stores only its shift and computes its chunks when asked. Nothing is stored per
step or per transfer, so ``ring_all_reduce(4096)`` (33 million transfers) builds
in milliseconds, and :mod:`labsupport.topology.simulate` costs each phase's
step once. ``tests/core/test_schedules_ring_plain.py`` checks that this ring and
the plain one send the same chunks, step by step.
"""

from __future__ import annotations

import numpy as np

from labsupport.schedules.model import Rotation, Schedule, Step, check_world_size


def ring_phase(src, dst, rotation: Rotation, reduce: bool, steps: int) -> list[Step]:  # noqa: ANN001
    """``steps`` steps over fixed (src, dst) pairs whose chunks move back one place per step."""
    flags = np.full(len(src), reduce)
    return [Step.rotating(src, dst, flags, rotation, -s) for s in range(steps)]


def ring_reduce_scatter(p: int) -> Schedule:
    """Ring reduce-scatter: p-1 steps; at step s rank r adds chunk (r-s-1) % p into rank r+1.

    ``base = r - 1`` and shift ``-s`` give chunk ``(r - 1 - s) % p``.
    """
    check_world_size(p)
    r = np.arange(p)
    steps = ring_phase(r, (r + 1) % p, Rotation(base=(r - 1) % p, modulus=p), True, p - 1)
    return Schedule("ring_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def ring_all_gather(p: int) -> Schedule:
    """Ring all-gather: p-1 steps; at step s rank r copies chunk (r-s) % p to rank r+1.

    ``base = r`` and shift ``-s`` give chunk ``(r - s) % p``.
    """
    check_world_size(p)
    r = np.arange(p)
    steps = ring_phase(r, (r + 1) % p, Rotation(base=r, modulus=p), False, p - 1)
    return Schedule("ring_all_gather", "all_gather", p, p, tuple(steps))


def ring_all_reduce(p: int) -> Schedule:
    """Ring all-reduce: ring reduce-scatter, then ring all-gather (2(p-1) steps, p chunks)."""
    return ring_reduce_scatter(p).then(ring_all_gather(p), "ring_all_reduce", "all_reduce")
