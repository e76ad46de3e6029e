"""The ring all-reduce of notebook 03, in plain code: one transfer at a time.

Start reading at :func:`ring_reduce_scatter`, then :func:`ring_all_gather`;
:func:`ring_all_reduce` is one followed by the other. Each builder returns a
:class:`~labsupport.schedules.model.Schedule`: a list of steps, each a list of
transfers "rank ``src`` sends chunk c to rank ``dst``, which adds it
(``reduce=True``) or copies it (``reduce=False``)".

The buffer is cut into p chunks, numbered 0 .. p-1, and rank r sends only to
its right-hand neighbour, rank (r + 1) % p. The rule is the line
``chunk = (r - s - 1) % p`` (reduce-scatter) and ``chunk = (r - s) % p``
(all-gather).

``labsupport.schedules.ring_all_reduce`` builds the same schedules in a compact
form that stays fast for 4096 ranks (:mod:`~labsupport.schedules.compact`);
``tests/core/test_schedules_ring_plain.py`` checks that the two agree.
"""

from __future__ import annotations

from labsupport.schedules.model import Schedule, Step, Transfer, check_world_size


def ring_reduce_scatter(p: int) -> Schedule:
    """Ring reduce-scatter on p ranks: afterwards rank r holds chunk r summed over all ranks."""
    check_world_size(p)
    steps = []
    # A chunk needs p - 1 hops to pass through all p ranks: p - 1 steps.
    for s in range(p - 1):
        transfers = []
        # Every rank sends at every step, so every link of the ring is busy.
        for r in range(p):
            # Chunk c starts its trip at rank c + 1 (at step 0 rank r sends chunk r - 1)
            # and moves one rank on per step, so at step s it is at rank c + 1 + s:
            # rank r sends chunk r - 1 - s.
            chunk = (r - s - 1) % p
            # The right-hand neighbour adds it to its own copy of that chunk. After
            # p - 1 hops chunk c has reached rank c + p, which is rank c, holding
            # the contributions of all p ranks.
            transfers.append(
                Transfer(src=r, dst=(r + 1) % p, chunks=range(chunk, chunk + 1), reduce=True)
            )
        steps.append(Step.of(transfers))
    return Schedule("ring_reduce_scatter", "reduce_scatter", p, p, tuple(steps))


def ring_all_gather(p: int) -> Schedule:
    """Ring all-gather on p ranks: rank r starts with chunk r; afterwards every rank has all p."""
    check_world_size(p)
    steps = []
    for s in range(p - 1):  # p - 1 other ranks need each chunk: p - 1 hops
        transfers = []
        for r in range(p):
            # Chunk c starts at rank c (after the reduce-scatter it is complete
            # there) and moves one rank on per step: at step s it is at rank c + s,
            # so rank r sends chunk r - s.
            chunk = (r - s) % p
            # The neighbour copies it: the chunk is already complete, nothing to add.
            # After p - 1 hops chunk c has reached rank c - 1, the last rank without it.
            transfers.append(
                Transfer(src=r, dst=(r + 1) % p, chunks=range(chunk, chunk + 1), reduce=False)
            )
        steps.append(Step.of(transfers))
    return Schedule("ring_all_gather", "all_gather", p, p, tuple(steps))


def ring_all_reduce(p: int) -> Schedule:
    """Ring all-reduce on p ranks: the reduce-scatter, then the all-gather (2(p - 1) steps).

    After the reduce-scatter rank r holds the complete chunk r, which is exactly
    where the all-gather expects chunk r to start.
    """
    return ring_reduce_scatter(p).then(ring_all_gather(p), "ring_all_reduce", "all_reduce")
