"""What overlap can hide, on paper: a step-time model for buckets, its bounds, the inequality.

Start at :class:`StepModel` (one step's numbers), then :func:`bucket_timeline` (when each
bucket is ready, leaves and arrives) and :func:`predict_step` (the step time it gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labsupport import costmodel, netem


@dataclass(frozen=True)
class StepModel:
    """One training step on paper: its compute (s), and the network its gradients cross.

    ``forward``, ``backward``, ``optimizer``: seconds of compute per step (measured
    without communication); ``world_size``: the ranks, p; ``alpha`` (s per message) and
    ``beta`` (s per byte): the link of the ring all-reduce. One record, so that every
    function below takes the same six numbers the same way: ``StepModel(F, B, O, p, α, β)``.
    """

    forward: float
    backward: float
    optimizer: float
    world_size: int
    alpha: float
    beta: float

    def all_reduce(self, nbytes: float) -> float:
        """Seconds of one ring all-reduce of ``nbytes`` on this network: 2(p-1)α + 2(p-1)/p·nβ."""
        return costmodel.ring_all_reduce_time(nbytes, self.world_size, self.alpha, self.beta)


def bucket_timeline(
    bucket_bytes: Sequence[int], m: StepModel, ready: Sequence[float] | None = None
) -> list[tuple[float, float, float]]:
    """Per bucket (in the order sent): (ready, start, end) in seconds from the step's start.

    ``ready``: when each bucket is ready, if known (measured, say); default backward
    producing bytes at a steady rate.
    """
    total = sum(bucket_bytes) or 1
    produced, link_free, out = 0, 0.0, []
    for k, n in enumerate(bucket_bytes):
        produced += n
        # Backward produces gradients from the last layer to the first; modelled as bytes
        # at a steady rate, bucket k is ready once the bytes of buckets 0..k are produced.
        at = m.forward + m.backward * produced / total if ready is None else ready[k]
        # One link: a bucket's all-reduce starts when it is ready *and* the previous one has
        # finished, and costs the ring's 2(p-1)α + 2(p-1)/p·n·β.
        start = max(at, link_free)
        link_free = start + m.all_reduce(n)
        out.append((at, start, link_free))
    return out


def predict_step(
    bucket_bytes: Sequence[int],
    m: StepModel,
    optimizer_overlap: bool = False,
    ready: Sequence[float] | None = None,
) -> float:
    """Seconds per step of the bucketed version (``ready`` as in :func:`bucket_timeline`)."""
    timeline = bucket_timeline(bucket_bytes, m, ready=ready)
    if not timeline:
        return m.forward + m.backward + m.optimizer
    # The step ends when backward and the last all-reduce have both finished, plus the
    # optimizer: step = max(F + B, end of the last all-reduce) + O. Too small buckets pay α
    # for every bucket; too large ones start late (a bucket is ready only when its last
    # gradient is), so less of the communication hides under backward.
    if not optimizer_overlap:
        return max(m.forward + m.backward, timeline[-1][2]) + m.optimizer
    # The optimizer need not wait for the last bucket: it can step each bucket's parameters
    # as soon as that bucket's all-reduce is done (torch's DDP can, with an optimizer-overlap
    # communication hook, ``_register_fused_optim``). Its time is split over the buckets by
    # bytes, and bucket k's share runs after backward and after its all-reduce, so only the
    # last bucket's share stays after the last all-reduce.
    total, compute_free = sum(bucket_bytes) or 1, m.forward + m.backward
    for n, (_, _, end) in zip(bucket_bytes, timeline, strict=True):
        compute_free = max(compute_free, end) + m.optimizer * n / total
    return compute_free


def predict_naive(param_bytes: Sequence[int], m: StepModel) -> float:
    """Seconds per step without overlap: compute, then one all-reduce per tensor."""
    comm = sum(m.all_reduce(n) for n in param_bytes)
    return m.forward + m.backward + comm + m.optimizer


def bounds(m: StepModel, comm: float, last: float) -> dict[str, float]:
    """The ideal ``max(F + B + O, C)`` and the DDP bound ``F + O + max(B + c_last, C)``.

    ``comm`` (C) is all buckets' all-reduces back to back, ``last`` (c_last) the last
    bucket's, measured or modelled (the network in ``m`` is not used). Both are *lower*
    bounds, the DDP bound the higher: a step whose optimizer waits for every bucket lies
    at or above it (:func:`predict_step` too); one that steps each bucket's parameters
    after its own all-reduce can go below it.
    """
    f, b, o = m.forward, m.backward, m.optimizer
    return {
        # Communication hidden under *all* compute.
        "ideal": max(f + b + o, comm),
        # Forward has no gradients to send yet, the last bucket is ready only when backward
        # ends, and the optimizer waits for it. That last clause is a choice, not a law:
        # predict_step(..., optimizer_overlap=True) models an optimizer that does not wait.
        "ddp bound": f + o + max(b + last, comm),
    }


def hidden_fraction(bucket_bytes: Sequence[int], m: StepModel) -> float:
    """The share of communication time that ends before backward does (0 .. 1)."""
    timeline = bucket_timeline(bucket_bytes, m)
    busy = sum(end - start for _, start, end in timeline)
    if busy == 0:
        return 1.0
    done = m.forward + m.backward
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
