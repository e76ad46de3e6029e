"""How the data-parallel graders judge what the ranks did, and say it in words.

* :func:`describe` - the first step where a run left one process's numbers: where, by
  how much, and what usually causes that pattern (summed instead of averaged, one bucket
  missed, no broadcast, a shard not all-gathered).
* :func:`zero_calls` - a ZeRO-1 step's collectives: a reduce-scatter and an all-gather,
  not an all-reduce of the whole gradient.

Each returns None when all is well, else the sentence of a FAIL message. A DDP wrapper's
all-reduces are judged by time, on the grader's own clock
(:mod:`labsupport.runtime.check.overlap_timing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labsupport.runtime.capstone import first_divergence
from labsupport.runtime.check.agreement import tolerances
from labsupport.runtime.language import N_, _
from labsupport.runtime.trace import Call


def _call(recorded: Any) -> Call:
    """A recorded call, from the plain tuple the ranks send (or a Call already)."""
    return recorded if isinstance(recorded, Call) else Call(*recorded)


def tolerance_words(dtype_name: str = "torch.float64") -> str:
    """The tolerances in words, for a PASS message."""
    rtol, atol, loss_rtol = tolerances(dtype_name)
    return _(
        "every element within {atol:g} + {rtol:g}·|x|, losses within {loss_rtol:g} relative"
    ).format(atol=atol, rtol=rtol, loss_rtol=loss_rtol)


def _hint(found: dict[str, Any], world: int, sharded: bool) -> str:
    what, ratio = found["what"], found.get("ratio", 1.0)
    if what == "initial weights":
        names = ", ".join(found["names"][:3])
        if sharded:
            return _(
                "The ranks do not start from rank 0's parameters and buffers ({names} ...): "
                "each rank built its model from its own seed; copy rank 0's in shard() "
                "(broadcast the flat buffer from rank 0), as torch does."
            ).format(names=names)
        return _(
            "The ranks do not start from rank 0's parameters and buffers ({names} ...): "
            "each rank built its model from its own seed; copy rank 0's in the constructor, "
            "as torch does."
        ).format(names=names)
    if what == "shards":
        return found["problem"] + "."
    if found.get("missing"):
        return _(
            "A parameter has no gradient where one process has one (or the reverse): "
            "every trainable parameter needs its averaged .grad; a frozen one none."
        )
    # One tensor of several at about p times: a bucket not averaged (below), not a sum.
    alone = len(found.get("names") or ()) == 1 < found.get("total", 1)
    if (
        what in ("gradients", "optimizer's gradients")
        and abs(ratio - world) < 0.05 * world
        and not alone
    ):
        return _(
            "The result is {ratio:.2f}x one process's, about the world size ({world}): the "
            "gradients were summed, not averaged. Divide by the world size."
        ).format(ratio=ratio, world=world)
    if what == "gradients" and len(found["names"]) < found["total"]:
        return _(
            "Only some gradients differ: is every bucket sent, waited for and copied back "
            "into param.grad before backward returns? The bucket sent last (the first "
            "layers' gradients) is the one most often missed."
        )
    if what in ("gradients", "optimizer's gradients"):
        return _(
            "Each rank seems to use a gradient of its own: average the gradients over the "
            "ranks (divide by the world size, all-reduce or reduce-scatter) before the "
            "optimizer uses them."
        )
    if what == "optimizer state":
        return _(
            "The optimizer's gradients were right but its state differs: is each shard's "
            "optimizer stepped once per step, with its group's hyperparameters?"
        )
    if what == "weights":
        return _(
            "The optimizer's gradients and state were right but the parameters differ: are "
            "the updated shards all-gathered into every rank's parameters, and does every "
            "group keep its own weight decay (none for biases and gains)?"
        )
    return _("The loss differs while the weights matched: is every rank's model the one trained?")


#: "The {what} of ... tensors differ", whole, for each kind of tensor ``first_divergence`` finds.
_TENSORS_DIFFER = {
    "initial weights": N_(
        "the initial weights of {count} of {total} tensors differ ({names}); largest "
        "difference {diff:.2e} in {worst}"
    ),
    "gradients": N_(
        "the gradients of {count} of {total} tensors differ ({names}); largest difference "
        "{diff:.2e} in {worst}"
    ),
    "optimizer's gradients": N_(
        "the optimizer's gradients of {count} of {total} tensors differ ({names}); largest "
        "difference {diff:.2e} in {worst}"
    ),
    "optimizer state": N_(
        "the optimizer state of {count} of {total} tensors differ ({names}); largest "
        "difference {diff:.2e} in {worst}"
    ),
    "weights": N_(
        "the weights of {count} of {total} tensors differ ({names}); largest difference "
        "{diff:.2e} in {worst}"
    ),
}

#: Where the first difference is: (before the first step?, on one rank?) -> the sentence.
_FIRST_DIFFERENCE = {
    (True, False): N_("first difference before the first step: {what}."),
    (True, True): N_("first difference before the first step on rank {rank}: {what}."),
    (False, False): N_("first difference at step {step} of {steps} (counting from 0): {what}."),
    (False, True): N_(
        "first difference at step {step} of {steps} (counting from 0) on rank {rank}: {what}."
    ),
}


def describe(found: dict[str, Any], world: int, steps: int, sharded: bool = False) -> str:
    """One paragraph: the first step that differs, where, by how much, and a hint."""
    if found["what"] == "loss":
        what = _(
            "the loss of the global batch is {got:.12g}, one process gets {want:.12g} "
            "(difference {diff:.2e})"
        ).format(got=found["got"], want=found["want"], diff=found["max_abs"])
    elif found["what"] == "shards":
        what = _("the ranks' shards do not divide the parameters")
    else:
        names = found["names"]
        listed = ", ".join(names[:4])
        if len(names) > 4:
            listed = _("{names} and {more} more").format(names=listed, more=len(names) - 4)
        what = _(_TENSORS_DIFFER[found["what"]]).format(
            count=len(names), total=found["total"], names=listed, diff=found["max_abs"],
            worst=found["worst"],
        )  # fmt: skip
    before, rank = found["step"] < 0, found.get("rank")
    first = _(_FIRST_DIFFERENCE[before, rank is not None]).format(
        step=found["step"], steps=steps, rank=rank, what=what
    )
    return first + "\n  " + _hint(found, world, sharded)


def steps_differ(results: Sequence[dict[str, Any]], steps: int) -> str | None:
    """``describe`` of the first difference over the ranks, or None."""
    found = first_divergence(results)
    if found is None:
        return None
    return describe(found, len(results), steps, results[0]["sharded"])


def zero_calls(
    results: Sequence[dict[str, Any]], total: int, under_ddp: bool = False
) -> str | None:
    """A ZeRO-1 optimizer's collectives per step (rank 0's); None if right."""
    world = len(results)
    for step, calls in enumerate(results[0]["calls"]):
        calls = [_call(c) for c in calls]
        big = [c for c in calls if c.name == "all_reduce" and c.numel >= total // world]
        if big and not under_ddp:
            return _(
                "step {step}: the gradients go through all_reduce ({numel} elements): each "
                "rank needs only its shard's mean, which reduce_scatter_tensor gives for half "
                "the traffic of an all-reduce."
            ).format(step=step, numel=big[0].numel)
        names = {c.name for c in calls}
        if not any("reduce_scatter" in n for n in names):
            return _(
                "step {step}: no reduce-scatter: the shard's gradient must be the ranks' mean."
            ).format(step=step)
        if not any("all_gather" in n for n in names):
            return _(
                "step {step}: no all-gather: every rank needs every shard's new parameters "
                "(all_gather_into_tensor into the flat buffer)."
            ).format(step=step)
    return None
