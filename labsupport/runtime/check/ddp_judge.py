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
from labsupport.runtime.trace import Call


def _call(recorded: Any) -> Call:
    """A recorded call, from the plain tuple the ranks send (or a Call already)."""
    return recorded if isinstance(recorded, Call) else Call(*recorded)


def tolerance_words(dtype_name: str = "torch.float64") -> str:
    """The tolerances in words, for a PASS message."""
    rtol, atol, loss_rtol = tolerances(dtype_name)
    return f"every element within {atol:g} + {rtol:g}·|x|, losses within {loss_rtol:g} relative"


def _hint(found: dict[str, Any], world: int, sharded: bool) -> str:
    what, ratio = found["what"], found.get("ratio", 1.0)
    if what == "initial weights":
        where = "shard() (broadcast the flat buffer from rank 0)" if sharded else "the constructor"
        names = ", ".join(found["names"][:3])
        return (
            f"The ranks do not start from rank 0's parameters and buffers ({names} ...): "
            f"each rank built its model from its own seed; copy rank 0's in {where}, "
            "as torch does."
        )
    if what == "shards":
        return found["problem"] + "."
    if found.get("missing"):
        return (
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
        return (
            f"The result is {ratio:.2f}x one process's, about the world size ({world}): the "
            "gradients were summed, not averaged. Divide by the world size."
        )
    if what == "gradients" and len(found["names"]) < found["total"]:
        return (
            "Only some gradients differ: is every bucket sent, waited for and copied back "
            "into param.grad before backward returns? The bucket sent last (the first "
            "layers' gradients) is the one most often missed."
        )
    if what in ("gradients", "optimizer's gradients"):
        return (
            "Each rank seems to use a gradient of its own: average the gradients over the "
            "ranks (divide by the world size, all-reduce or reduce-scatter) before the "
            "optimizer uses them."
        )
    if what == "optimizer state":
        return (
            "The optimizer's gradients were right but its state differs: is each shard's "
            "optimizer stepped once per step, with its group's hyperparameters?"
        )
    if what == "weights":
        return (
            "The optimizer's gradients and state were right but the parameters differ: are "
            "the updated shards all-gathered into every rank's parameters, and does every "
            "group keep its own weight decay (none for biases and gains)?"
        )
    return "The loss differs while the weights matched: is every rank's model the one trained?"


def describe(found: dict[str, Any], world: int, steps: int, sharded: bool = False) -> str:
    """One paragraph: the first step that differs, where, by how much, and a hint."""
    step = found["step"]
    when = "before the first step" if step < 0 else f"at step {step} of {steps} (counting from 0)"
    who = "" if found.get("rank") is None else f" on rank {found['rank']}"
    if found["what"] == "loss":
        what = (
            f"the loss of the global batch is {found['got']:.12g}, one process gets "
            f"{found['want']:.12g} (difference {found['max_abs']:.2e})"
        )
    elif found["what"] == "shards":
        what = "the ranks' shards do not divide the parameters"
    else:
        names = found["names"]
        listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        what = (
            f"the {found['what']} of {len(names)} of {found['total']} tensors differ "
            f"({listed}); largest difference {found['max_abs']:.2e} in {found['worst']}"
        )
    return f"first difference {when}{who}: {what}.\n  {_hint(found, world, sharded)}"


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
            return (
                f"step {step}: the gradients go through all_reduce ({big[0].numel} "
                "elements): each rank needs only its shard's mean, which "
                "reduce_scatter_tensor gives for half the traffic of an all-reduce."
            )
        names = {c.name for c in calls}
        if not any("reduce_scatter" in n for n in names):
            return f"step {step}: no reduce-scatter: the shard's gradient must be the ranks' mean."
        if not any("all_gather" in n for n in names):
            return (
                f"step {step}: no all-gather: every rank needs every shard's new "
                "parameters (all_gather_into_tensor into the flat buffer)."
            )
    return None
