"""What overlap can hide, on paper: the overlap inequality and a step-time model for buckets.

Backward produces gradients from the last layer to the first. Model it as producing
bytes at a steady rate: bucket ``k`` is ready once the bytes of buckets ``0..k``
have been produced, at ``forward + backward * (bytes so far / all bytes)``. One link:
a bucket's all-reduce starts when it is ready *and* the previous one has finished,
and costs the ring's ``2(p-1)α + 2(p-1)/p·n·β``. The step ends when backward and
the last all-reduce have both finished, plus the optimizer::

    step = max(forward + backward, end of the last all-reduce) + optimizer

Too small buckets pay α for every bucket; too large ones start late (the first
bucket is ready only when its last gradient is), so less of the communication
hides under backward. :func:`hidden_fraction` is the overlap inequality: how much
of the communication fits under the backward time that remains after each bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

from labsupport import costmodel, netem


def bucket_timeline(
    bucket_bytes: Sequence[int], forward: float, backward: float, p: int,
    alpha: float, beta: float,
) -> list[tuple[float, float, float]]:  # fmt: skip
    """Per bucket (in the order sent): (ready, start, end) in seconds from the step's start."""
    total = sum(bucket_bytes) or 1
    produced, link_free, out = 0, 0.0, []
    for n in bucket_bytes:
        produced += n
        ready = forward + backward * produced / total
        start = max(ready, link_free)
        link_free = start + costmodel.ring_all_reduce_time(n, p, alpha, beta)
        out.append((ready, start, link_free))
    return out


def predict_step(
    bucket_bytes: Sequence[int], forward: float, backward: float, optimizer: float, p: int,
    alpha: float, beta: float,
) -> float:  # fmt: skip
    """Seconds per step of the bucketed version (see the module docstring)."""
    timeline = bucket_timeline(bucket_bytes, forward, backward, p, alpha, beta)
    last = timeline[-1][2] if timeline else 0.0
    return max(forward + backward, last) + optimizer


def predict_naive(
    param_bytes: Sequence[int], forward: float, backward: float, optimizer: float, p: int,
    alpha: float, beta: float,
) -> float:  # fmt: skip
    """Seconds per step without overlap: compute, then one all-reduce per tensor."""
    comm = sum(costmodel.ring_all_reduce_time(n, p, alpha, beta) for n in param_bytes)
    return forward + backward + comm + optimizer


def hidden_fraction(
    bucket_bytes: Sequence[int], forward: float, backward: float, p: int,
    alpha: float, beta: float,
) -> float:  # fmt: skip
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
