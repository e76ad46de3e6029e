"""Overlap, judged by time, on a clock the grader owns (notebooks 07 and 10's DDP graders).

A DDP wrapper overlaps when its all-reduces travel while backward still computes. The
grader decides that from times, and the times are its own, the same on every machine:

* **its network**, :data:`NETWORK` (2 ms and 100 MB/s per message, ring all-reduce), set
  on every rank of an emulated cluster for the length of the check and then put back; a
  cluster that cannot emulate (plain gloo, NCCL) gets a temporary emulated one of the
  same size (:func:`labsupport.runtime.check.overlap.timed_runs`);
* **its compute model**: the grading model spends :data:`LAYER_COMPUTE` (2 ms) of emulated
  accelerator time in each of its five layers' backward
  (:func:`labsupport.runtime.emulator.compute`), and the CPU time of backward and of the
  hooks is not charged (:func:`labsupport.runtime.emulator.clock.hidden`): the clock moves
  only by that compute and by waits, so every gradient becomes ready at the same emulated
  time on a fast CPU and a slow one, and a hook that waits for nothing returns at once;
* **its record**: every operation the emulated process group executed, with the emulated
  time it was issued (:func:`labsupport.runtime.emulator.operations`, however it was called:
  ``dist.all_reduce``, ``from torch.distributed import all_reduce``, a future), and, from
  gradient hooks of its own registered before and after the wrapper's, when each gradient
  became ready and when the wrapper's hook for it returned.

**The rules** (:func:`judge`), with ε = :data:`EPSILON` (0.5 ms, a slack far below one
all-reduce on this network):

1. one all-reduce per bucket, in bucket order (per parameter, in any order, without buckets);
2. bucket k is issued no later than ε after max(the time its last gradient was ready, the
   time bucket k−1 was issued): sending everything from backward's last gradient, or after
   backward, fails;
3. no hook returns later than ε after its gradient was ready, and backward does not stand
   still for more than ε after a hook returned: waiting inside backward for an all-reduce
   (``work.wait()``, ``future.wait()``, ``torch.futures.wait_all``, ``async_op=False``)
   costs at least one all-reduce, 4 ms at 2 ranks on this network, and fails.

What it cannot see: work a hook hands to a thread of its own; a wait inside the hook of
backward's very last gradient made by a hook registered otherwise than with
``register_post_accumulate_grad_hook`` (``DDPBase`` registers that kind); collectives on a
process group of the learner's own making, which the grader does not emulate (a FAIL then
says that no all-reduce reached the group it watches).
"""

from __future__ import annotations

from typing import Any

import torch

from labsupport.netem.link import Link
from labsupport.netem.network import Network
from labsupport.runtime.language import N_, _

#: The grader's network: every message costs 2 ms + bytes / 100 MB/s; ring all-reduce.
NETWORK = Network(intra=Link(latency=2e-3, bandwidth=100e6), algorithm="ring")
#: Emulated accelerator time of each layer of the grading model, in its backward (s).
LAYER_COMPUTE = 2e-3
#: The slack of every rule (s): far less than one all-reduce (4 ms at 2 ranks).
EPSILON = 0.5e-3
#: Steps the wrapper trains for the timing (each one judged).
TIMED_STEPS = 3

#: Every FAIL sentence of the timing, whole, with named placeholders (times in ms from the
#: start of backward), so that a translation can take each as it is.
MESSAGES = {
    "none": N_(
        "At step {step} on rank {rank} no all-reduce reached the process group the grader "
        "watches; it saw {seen}. If your gradients were right, they travelled on another "
        'group (one you created, e.g. dist.new_group(backend="gloo")): send them on the '
        "wrapper's process_group (None is the default group) with dist.all_reduce."
    ),
    "count, parameter": N_(
        "At step {step} the all-reduces carried {got} elements; expected {want}, one per "
        "trainable parameter."
    ),
    "count, bucket": N_(
        "At step {step} the all-reduces carried {got} elements; expected {want}, one per "
        "bucket, in bucket order."
    ),
    "order": N_(
        "At step {step} the buckets left in the order {got} (elements), not in bucket order "
        "{want}: send a bucket only once every bucket before it has been sent, as torch's "
        "Reducer does. Gradients arrive in another order than the buckets (here the bias "
        "registered first is used last), and ranks that issue all-reduces in different "
        "orders hang or mix up buckets."
    ),
    "late, parameter": N_(
        "At step {step} the all-reduce of {param}'s gradient left at {issued:.1f} ms, "
        "{late:.1f} ms after it could have (its gradient was ready at {ready:.1f} ms; "
        "backward's last gradient at {last:.1f} ms): issue each all-reduce from the hook "
        "that completes it, so that it travels while backward goes on."
    ),
    "late, bucket": N_(
        "At step {step} bucket {bucket} ({params}) left at {issued:.1f} ms, {late:.1f} ms "
        "after it could have (its gradients ready and the bucket before it sent at "
        "{ready:.1f} ms; backward's last gradient at {last:.1f} ms): send each bucket from "
        "the hook that completes it, as soon as the buckets before it have left, so that "
        "it travels while backward goes on."
    ),
    "hook": N_(
        "At step {step} the hook of {param} returned {late:.1f} ms after its gradient was "
        "ready: it waited (for its all-reduce, or another) during backward, so backward "
        "stood still. Keep the handles and wait in wait_for_gradients()."
    ),
    "stall": N_(
        "At step {step} backward stood still for {late:.1f} ms after the hook of {param} "
        "returned: something waited during backward (a hook of another kind, or a "
        "callback). Wait only in wait_for_gradients()."
    ),
}


class LayerCompute(torch.autograd.Function):
    """Identity forward; backward spends the layer's emulated compute and notes when it began."""

    #: The list a timed run notes ``(layer name, emulated time)`` in; None: notes nothing.
    marks: list[tuple[str, float]] | None = None

    @staticmethod
    def forward(ctx, x: torch.Tensor, seconds: float, name: str) -> torch.Tensor:  # noqa: ANN001, D102
        ctx.seconds, ctx.name = seconds, name
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # noqa: ANN001, D102
        from labsupport.runtime.emulator import clock

        if LayerCompute.marks is not None:
            LayerCompute.marks.append((ctx.name, clock.now()))
        clock.compute(ctx.seconds)
        return grad, None, None


def _ms(t: float, zero: float) -> float:
    return (t - zero) * 1e3


def _late_bucket(step: int, record: dict, buckets: list[list[str]] | None) -> str | None:
    """Rule 2 for one step of one rank: the first all-reduce issued later than it could be."""
    ready = dict(record["ready"])
    zero, last = record["backward"][0], max(ready.values())
    reduces = [op for op in record["ops"] if op[0] == "all_reduce"]
    previous = -float("inf")
    if buckets is None:  # one per parameter: the k-th issued goes with the k-th ready
        order = sorted(ready, key=ready.get)
        groups = [[name] for name in order]
    else:
        groups = buckets
    for k, (op, names) in enumerate(zip(reduces, groups, strict=False)):
        issued = op[2]
        due = max(max(ready[n] for n in names), previous)
        previous = issued
        if issued <= due + EPSILON:
            continue
        times = {
            "ready": _ms(due, zero),
            "issued": _ms(issued, zero),
            "late": (issued - due) * 1e3,
            "last": _ms(last, zero),
        }
        if buckets is None:
            return _(MESSAGES["late, parameter"]).format(step=step, param=names[0], **times)
        return _(MESSAGES["late, bucket"]).format(
            step=step, bucket=k, params=", ".join(names), **times
        )
    return None


def _waited(step: int, record: dict) -> str | None:
    """Rule 3 for one step of one rank: a hook that returned late, or a stall after one."""
    ready, returned = dict(record["ready"]), dict(record["returned"])
    for name, t in record["ready"]:
        late = returned.get(name, t) - t
        if late > EPSILON:
            return _(MESSAGES["hook"]).format(step=step, param=name, late=late * 1e3)
    # At one instant a hook returns before the next layer begins and before the gradients
    # that layer then makes are ready: sort ties in that order.
    events = sorted(
        [(t, 0, "returned", n) for n, t in returned.items()]
        + [(t, 1, "layer", n) for n, t in record["layers"]]
        + [(t, 2, "ready", n) for n, t in ready.items()]
    )
    for (t, _order, kind, name), (after, *_rest) in zip(events, events[1:], strict=False):
        if kind == "returned" and after - t > EPSILON:
            return _(MESSAGES["stall"]).format(step=step, param=name, late=(after - t) * 1e3)
    return None


def judge(
    runs: list[list[dict[str, Any]]], buckets: list[list[str]] | None, sizes: list[int]
) -> str | None:
    """The first rule broken, over every rank and step (each rank's :func:`timed_run`).

    ``buckets``: the parameters' names of each bucket, in the order they must leave; None
    for one all-reduce per parameter. ``sizes``: the elements each must carry, in that
    order (per parameter: in any order).
    """
    count = "count, parameter" if buckets is None else "count, bucket"
    for rank, steps in enumerate(runs):
        for step, record in enumerate(steps):
            reduces = [op for op in record["ops"] if op[0] == "all_reduce"]
            if not reduces:
                # translators: what the grader saw instead of an all-reduce: nothing at all
                seen = ", ".join(sorted({op[0] for op in record["ops"]})) or _("no operation")
                return _(MESSAGES["none"]).format(step=step, rank=rank, seen=seen)
            got = [op[1] // record["itemsize"] for op in reduces]
            if sorted(got) != sorted(sizes):
                return _(MESSAGES[count]).format(step=step, got=got, want=sizes)
            if buckets is not None and got != sizes:
                return _(MESSAGES["order"]).format(step=step, got=got, want=sizes)
            problem = _waited(step, record) or _late_bucket(step, record, buckets)
            if problem:
                return problem
    return None
