"""What overlap can hide, on paper: a step-time model for buckets, its bounds, the inequality.

Backward produces gradients from the last layer to the first. Model it as producing
bytes at a steady rate: bucket ``k`` is ready once the bytes of buckets ``0..k``
have been produced, at ``F + B * (bytes so far / all bytes)``. One link: a bucket's
all-reduce starts when it is ready *and* the previous one has finished, and costs the
ring's ``2(p-1)α + 2(p-1)/p·n·β``. The step ends when backward and the last
all-reduce have both finished, plus the optimizer::

    step = max(F + B, end of the last all-reduce) + O

Too small buckets pay α for every bucket; too large ones start late (a bucket is
ready only when its last gradient is), so less of the communication hides under
backward. Two bounds frame any measurement (C: all buckets' all-reduces back to
back; c_last: the last bucket's):

* the ideal ``max(F + B + O, C)``: communication hidden under *all* compute;
* the DDP bound ``F + O + max(B + c_last, C)``: forward has no gradients to send yet,
  the last bucket is ready only when backward ends, and the optimizer waits for it.

That last clause is a choice, not a law: the optimizer can step each bucket's
parameters as soon as that bucket's all-reduce is done (torch's DDP can do it with an
optimizer-overlap communication hook, ``_register_fused_optim``). ``predict_step(...,
optimizer_overlap=True)`` models it: the optimizer's time is split over the buckets
by bytes, and bucket k's share runs after backward and after its all-reduce, so only
the last bucket's share stays after the last all-reduce.
"""

from __future__ import annotations

from collections.abc import Sequence

from labsupport import costmodel, netem


def bucket_timeline(
    bucket_bytes: Sequence[int],
    forward: float,
    backward: float,
    p: int,
    alpha: float,
    beta: float,
    ready: Sequence[float] | None = None,
) -> list[tuple[float, float, float]]:
    """Per bucket (in the order sent): (ready, start, end) in seconds from the step's start.

    ``ready``: when each bucket is ready, if known (measured, say); default backward
    producing bytes at a steady rate.
    """
    total = sum(bucket_bytes) or 1
    produced, link_free, out = 0, 0.0, []
    for k, n in enumerate(bucket_bytes):
        produced += n
        at = forward + backward * produced / total if ready is None else ready[k]
        start = max(at, link_free)
        link_free = start + costmodel.ring_all_reduce_time(n, p, alpha, beta)
        out.append((at, start, link_free))
    return out


def predict_step(
    bucket_bytes: Sequence[int],
    forward: float,
    backward: float,
    optimizer: float,
    p: int,
    alpha: float,
    beta: float,
    optimizer_overlap: bool = False,
    ready: Sequence[float] | None = None,
) -> float:
    """Seconds per step of the bucketed version (see the module docstring; ``ready`` as in
    :func:`bucket_timeline`)."""
    timeline = bucket_timeline(bucket_bytes, forward, backward, p, alpha, beta, ready)
    if not timeline:
        return forward + backward + optimizer
    if not optimizer_overlap:
        return max(forward + backward, timeline[-1][2]) + optimizer
    total, compute_free = sum(bucket_bytes) or 1, forward + backward
    for n, (_, _, end) in zip(bucket_bytes, timeline, strict=True):
        compute_free = max(compute_free, end) + optimizer * n / total
    return compute_free


def predict_naive(
    param_bytes: Sequence[int],
    forward: float,
    backward: float,
    optimizer: float,
    p: int,
    alpha: float,
    beta: float,
) -> float:
    """Seconds per step without overlap: compute, then one all-reduce per tensor."""
    comm = sum(costmodel.ring_all_reduce_time(n, p, alpha, beta) for n in param_bytes)
    return forward + backward + comm + optimizer


def bounds(
    forward: float, backward: float, optimizer: float, comm: float, last: float
) -> dict[str, float]:
    """The ideal ``max(F + B + O, C)`` and the DDP bound ``F + O + max(B + c_last, C)``."""
    return {
        "ideal": max(forward + backward + optimizer, comm),
        "ddp bound": forward + optimizer + max(backward + last, comm),
    }


def hidden_fraction(
    bucket_bytes: Sequence[int],
    forward: float,
    backward: float,
    p: int,
    alpha: float,
    beta: float,
) -> float:
    """The share of communication time that ends before backward does (0 .. 1)."""
    timeline = bucket_timeline(bucket_bytes, forward, backward, p, alpha, beta)
    busy = sum(end - start for _, start, end in timeline)
    if busy == 0:
        return 1.0
    done = forward + backward
    hidden = sum(max(0.0, min(end, done) - start) for _, start, end in timeline)
    return hidden / busy


def network_for(
    backward: float, nbytes: int, p: int, latency: float = 200e-6, ratio: float = 0.8
) -> netem.Network:
    """An emulated network on which a ring all-reduce of ``nbytes`` takes ``ratio × backward``.

    One NIC per rank (``ranks_per_node=1``), ``latency`` per message, the bandwidth solved
    from the ring's cost ``2(p-1)α + 2(p-1)/p·n/bandwidth``. Overlap is only worth
    studying where communication is comparable to the backward pass: this picks such a
    network for *your* machine's backward time.
    """
    wire = max(ratio * backward - 2 * (p - 1) * latency, 1e-3)
    return netem.Network(
        inter=netem.Link(latency, 2 * (p - 1) / p * nbytes / wire), ranks_per_node=1
    )
