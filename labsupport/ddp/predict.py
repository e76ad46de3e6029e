"""What overlap can hide, on paper: a step-time model for buckets, its bounds, the inequality.

Start at :class:`StepModel` (one step's numbers), then :func:`bucket_timeline` (when each
bucket is ready, leaves and arrives) and :func:`predict_step` (the step time it gives).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from labsupport import costmodel, netem


def _signature(*names: str) -> inspect.Signature:
    """A signature of positional-or-keyword ``names``: how the old forms below are read."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter(name, kind) for name in names])


# The numbers these functions took one by one before StepModel existed, in their order; the
# notebooks and decks still call them so (their stored outputs must not change), and every
# function below accepts that form too (StepModel.of reads it).
_OLD = _signature("forward", "backward", "optimizer", "p", "alpha", "beta")
_OLD_NO_OPTIMIZER = _signature("forward", "backward", "p", "alpha", "beta")
_BOUNDS = _signature("comm", "last")
_OLD_BOUNDS = _signature("forward", "backward", "optimizer", "comm", "last")


@dataclass(frozen=True)
class StepModel:
    """One training step on paper: its compute (s), and the network its gradients cross.

    ``forward``, ``backward``, ``optimizer``: seconds of compute per step (measured
    without communication); ``world_size``: the ranks, p; ``alpha`` (s per message) and
    ``beta`` (s per byte): the link of the ring all-reduce. In the old functions' order,
    so ``StepModel(F, B, O, p, alpha, beta)`` holds what ``predict_step`` took one by one.
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

    @classmethod
    def of(
        cls,
        model: StepModel | float | None,
        old: Sequence[float] = (),
        named: Mapping[str, float] | None = None,
        optimizer: bool = True,
    ) -> StepModel:
        """``model`` if it is one; else one from the old form's numbers (see ``_OLD``).

        The old form is ``forward, backward, optimizer, p, alpha, beta``, positional or by
        name; without ``optimizer`` where ``optimizer=False`` (it is then 0).
        """
        named = dict(named or {})
        if isinstance(model, StepModel):
            if old or named:
                raise TypeError("pass a StepModel or the old numbers, not both")
            return model
        given = (*old,) if model is None else (model, *old)
        form = _OLD if optimizer else _OLD_NO_OPTIMIZER
        try:
            v = form.bind(*given, **named).arguments
        except TypeError as exc:
            raise TypeError(f"pass a StepModel, or the numbers {form}: {exc}") from None
        return cls(
            v["forward"], v["backward"], v.get("optimizer", 0.0), v["p"], v["alpha"], v["beta"]
        )


def bucket_timeline(
    bucket_bytes: Sequence[int],
    model: StepModel | float | None = None,
    *old: float,
    ready: Sequence[float] | None = None,
    **old_named: float,
) -> list[tuple[float, float, float]]:
    """Per bucket (in the order sent): (ready, start, end) in seconds from the step's start.

    ``ready``: when each bucket is ready, if known (measured, say); default backward
    producing bytes at a steady rate. Also takes the old form (forward, backward, p, alpha,
    beta) instead of ``model``.
    """
    m = StepModel.of(model, old, old_named, optimizer=False)
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
    model: StepModel | float | None = None,
    *old: float,
    optimizer_overlap: bool = False,
    ready: Sequence[float] | None = None,
    **old_named: float,
) -> float:
    """Seconds per step of the bucketed version (``ready`` as in :func:`bucket_timeline`).

    Also takes the old form (forward, backward, optimizer, p, alpha, beta) instead of ``model``.
    """
    m = StepModel.of(model, old, old_named)
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


def predict_naive(
    param_bytes: Sequence[int],
    model: StepModel | float | None = None,
    *old: float,
    **old_named: float,
) -> float:
    """Seconds per step without overlap: compute, then one all-reduce per tensor.

    Also takes the old form (forward, backward, optimizer, p, alpha, beta) instead of ``model``.
    """
    m = StepModel.of(model, old, old_named)
    comm = sum(m.all_reduce(n) for n in param_bytes)
    return m.forward + m.backward + comm + m.optimizer


def bounds(model: StepModel | float, *args: float, **kwargs: float) -> dict[str, float]:
    """The ideal ``max(F + B + O, C)`` and the DDP bound ``F + O + max(B + c_last, C)``.

    ``bounds(model, comm, last)``: ``comm`` (C) is all buckets' all-reduces back to back,
    ``last`` (c_last) the last bucket's, measured or modelled. The old form
    ``bounds(forward, backward, optimizer, comm, last)`` works too.
    """
    if isinstance(model, StepModel):
        v = _BOUNDS.bind(*args, **kwargs).arguments
        f, b, o = model.forward, model.backward, model.optimizer
    else:
        v = _OLD_BOUNDS.bind(model, *args, **kwargs).arguments
        f, b, o = v["forward"], v["backward"], v["optimizer"]
    return {
        # Communication hidden under *all* compute.
        "ideal": max(f + b + o, v["comm"]),
        # Forward has no gradients to send yet, the last bucket is ready only when backward
        # ends, and the optimizer waits for it. That last clause is a choice, not a law:
        # predict_step(..., optimizer_overlap=True) models an optimizer that does not wait.
        "ddp bound": f + o + max(b + v["last"], v["comm"]),
    }


def hidden_fraction(
    bucket_bytes: Sequence[int],
    model: StepModel | float | None = None,
    *old: float,
    **old_named: float,
) -> float:
    """The share of communication time that ends before backward does (0 .. 1).

    Also takes the old form (forward, backward, p, alpha, beta) instead of ``model``.
    """
    m = StepModel.of(model, old, old_named, optimizer=False)
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
