"""Graders for notebook 12: the row-parallel layer's all-reduce, and a layout with its time.

* :func:`check_row_parallel` - your ``torch.autograd.Function`` for Megatron's g (the
  all-reduce at the end of a row-parallel layer: all-reduce forward, identity
  backward). The grader puts it at the end of :class:`labsupport.parallel.ParallelMLP`
  (whose f it keeps) on every rank and compares, with one process on the dense MLP,
  the output, the gradient of the input and the gradients of both weight shards. An
  all-reduce missing forward leaves each rank with a partial sum; one added backward
  multiplies the weight gradients by the number of ranks: the message says which.
* :func:`check_layout` - your layout (a :class:`labsupport.parallel.Layout`) for a
  workload on a cluster, and your predicted communication time per step. The layout
  must fit (memory, layers, batch) and be within ``rtol`` of the best layout's time
  (communication + bubble, :func:`labsupport.parallel.best`); the prediction within
  ``rtol`` of the simulator's communication time for your layout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from labsupport import parallel
from labsupport.runtime.check.core import cluster_for_check
from labsupport.runtime.check.messages import (
    FAIL,
    PASS,
    CheckResult,
    describe_difference,
    explain_failure,
    not_implemented,
    per_rank_message,
    report,
)
from labsupport.runtime.language import N_, _

H = 8  # hidden size of the graded MLP (4h inside)
# What the grader compares on each rank: the keys of its results, translated where a
# message names them (_named), so that the kernel's language decides, not the ranks'.
# translators: the four results compared, shown as ['output']: expected ..., got ...
OUTPUT = N_("output")
INPUT_GRADIENT = N_("input's gradient")
FC1_GRADIENT = N_("fc1 shard's gradient")
FC2_GRADIENT = N_("fc2 shard's gradient")


def _mlp_step(g_apply: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
    """On one rank: the split MLP with ``g_apply`` as its g; its output and gradients."""
    import torch.distributed as dist

    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
    torch.manual_seed(1 + dist.get_rank() * 0)  # the same input on every rank
    x = torch.randn(6, H, requires_grad=True)
    mlp = parallel.ParallelMLP(fc1, fc2)
    out = g_apply(mlp.partial(parallel.f(x))) + mlp.b2
    out.pow(2).sum().backward()
    zero = torch.zeros(0)
    grads = [t.grad if t.grad is not None else zero for t in (x, mlp.w1, mlp.w2)]
    return {
        OUTPUT: out.detach(),
        INPUT_GRADIENT: grads[0],
        FC1_GRADIENT: grads[1],
        FC2_GRADIENT: grads[2],
    }


def _named(results: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``results`` with their keys in the learner's language (for the message)."""
    return {_(key): value for key, value in results.items()}


def _theirs(g_class: Any, x: torch.Tensor) -> torch.Tensor:
    return g_class.apply(x)


def _both(g_class: Any) -> tuple[dict, dict]:
    """On one rank: (the reference's results, the learner's)."""
    import torch.distributed as dist

    expected = _mlp_step(parallel.g)
    dist.barrier()
    return expected, _mlp_step(functools.partial(_theirs, g_class))


def _hint(expected: dict, got: dict, world: int) -> str:
    """What the learner's g probably does, from how its results differ."""
    ew, gw = expected[FC2_GRADIENT], got[FC2_GRADIENT]
    if gw.shape == ew.shape and torch.allclose(gw, ew * world, rtol=1e-4, atol=1e-6):
        return "  " + _(
            "Hint: the weight gradients are {world}x too large: the gradient was all-reduced "
            "in backward too. g's backward is the identity (f, at the block's input, all-reduces)."
        ).format(world=world)
    if describe_difference(expected[OUTPUT], got[OUTPUT], rtol=1e-4, atol=1e-6):
        return "  " + _(
            "Hint: each rank holds a partial sum GeLU(x A_i) B_i; forward must add them over "
            "the ranks (dist.all_reduce, in place, then return the tensor)."
        )
    return ""


def check_row_parallel(g_class: Any, cluster: Any = None, timeout: float = 60.0) -> CheckResult:
    """Grade ``g_class`` (an autograd Function: all-reduce forward, identity backward)."""
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    name = getattr(g_class, "__name__", _("Your g"))
    try:
        with cluster_for_check(cluster) as running:
            results = running.call(_both, (g_class,), timeout=timeout)
    except (RankError, CollectiveTimeout) as err:
        hints = {"timeout": _("Do all ranks call the same all-reduce, once, in forward?")}
        return explain_failure(err, name, timeout, hints=hints)
    world = len(results)
    wrong = {}
    for rank, (expected, got) in enumerate(results):
        text = describe_difference(_named(expected), _named(got), rtol=1e-4, atol=1e-6)
        if text:
            wrong[rank] = text
    if wrong:
        expected, got = results[min(wrong)]
        return report(
            False, per_rank_message(name, wrong, world) + "\n" + _hint(expected, got, world)
        )
    return report(
        True,
        f"{PASS} "
        + _(
            "{name}: at the end of the row-parallel layer, on all {world} ranks, the output "
            "and the gradients of the input and of both weight shards equal one process's on the "
            "dense MLP: one all-reduce forward, none backward."
        ).format(name=name, world=world),
    )


def communication(workload: parallel.Workload, lay: parallel.Layout, cluster: Any) -> float:
    """The simulator's communication time per step (every class but the bubble), seconds."""
    rows = parallel.step_time(workload, lay, cluster)
    return sum(r["time"] for r in rows if r["class"] != "pipeline bubble")


def check_layout(
    choose: Callable[[], parallel.Layout] | parallel.Layout,
    predict: Callable[[parallel.Layout], float],
    workload: parallel.Workload,
    npus: int,
    cluster: Any,
    rtol: float = 0.10,
) -> CheckResult:
    """Grade a layout (``choose()``) and ``predict(layout)``, its communication seconds per step."""
    name = _("Your layout")
    try:
        lay = choose() if callable(choose) else choose
        predicted = float(predict(lay))
    except NotImplementedError:
        return not_implemented(name)
    except Exception as exc:  # the learner's bug, reported kindly
        return report(
            False,
            f"{FAIL} "
            + _("{name}: your code raised {error}: {exc}").format(
                name=name, error=type(exc).__name__, exc=exc
            ),
        )
    if not isinstance(lay, parallel.Layout) or lay.npus != npus:
        return report(
            False,
            f"{FAIL} "
            + _("{name}: return a parallel.Layout of {npus} NPUs, got {layout}").format(
                name=name, npus=npus, layout=repr(lay)
            ),
        )
    if not parallel.layout.fits(workload, lay, cluster.memory):
        states = parallel.layout.model_states(workload, lay) / 1e9
        return report(
            False,
            f"{FAIL} "
            + _(
                "{name} {layout} does not fit: {states:.0f} GB of model states per NPU (at most "
                "{memory:.0f} GB), or the layers, batch or experts do not divide."
            ).format(name=name, layout=lay, states=states, memory=cluster.memory / 1e9),
        )
    ranked = parallel.best(workload, npus, cluster)
    score = {str(candidate): t for t, candidate in ranked}[str(lay)]
    top_time, top = ranked[0]
    if score > top_time * (1 + rtol):
        return report(
            False,
            f"{FAIL} "
            + _(
                "{name} {layout}: communication + bubble {score:.0f} ms per step; the best "
                "layout takes {best:.0f} ms (more than {rtol:.0%} less). Which class "
                "dominates your layout's time (parallel.step_time), and which split shrinks it?"
            ).format(name=name, layout=lay, score=score * 1e3, best=top_time * 1e3, rtol=rtol),
        )
    model = communication(workload, lay, cluster)
    if abs(predicted - model) > rtol * model:
        return report(
            False,
            f"{FAIL} "
            + _(
                "{name} {layout} is good, but your predicted communication {predicted:.1f} "
                "ms per step is not within {rtol:.0%} of the simulator's {model:.1f} ms. Add "
                "each class's calls x the time of one call (parallel.collectives lists them)."
            ).format(
                name=name, layout=lay, predicted=predicted * 1e3, rtol=rtol, model=model * 1e3
            ),
        )
    return report(
        True,
        f"{PASS} "
        + _(
            "{name} {layout} is within {rtol:.0%} of the best ({best}), and your predicted "
            "{predicted:.1f} ms of communication per step is within {rtol:.0%} of the "
            "simulator's {model:.1f} ms."
        ).format(
            name=name, layout=lay, rtol=rtol, best=top, predicted=predicted * 1e3, model=model * 1e3
        ),
    )


#: Exercise -> (what its cell defines, its grader).
EXERCISES = {"12.1": ("MyG", check_row_parallel), "12.2": ("choose_layout", check_layout)}
