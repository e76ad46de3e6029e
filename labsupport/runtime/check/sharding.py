"""Grader for notebook 11: your ZeRO-3 forward, gathering, freeing and prefetching each unit.

**In the notebook**: ``check_zero3_forward(MyZeRO3)``. ``MyZeRO3`` subclasses
:class:`labsupport.sharding.ZeRO3` and writes its forward's two moments,
``before_forward(k)`` and ``after_forward(k)``. The grader owns the clock: it starts
:data:`RANKS` ranks of its own on :data:`NETWORK`, an emulated network on which one
unit's all-gather takes about half of a unit's forward, and trains :data:`GRADE`
(equal blocks, each with emulated compute, float64, AdamW) with your class. It checks

1. the losses and every weight after every step against one process on the whole batch
   (float64, the graders' tolerance);
2. memory: when forward returns, every unit but the last is freed (its buffer holds no
   memory: ``unit.free()``), and when backward returns every unit is;
3. prefetch, **by time** (the netem group's record of what it executed,
   :func:`labsupport.runtime.emulator.operations`, and the emulated clock): unit k+1's
   all-gather must be issued before unit k's compute ends, must not be waited for
   before unit k computes, and the forward must take less than halfway from the
   prefetching forward's time on paper (:func:`labsupport.sharding.zero3_step`'s rule,
   ``gather + L·f``) to the gather-and-wait forward's (``L·(gather + f)``).

``passed(MyZeRO3)`` tells later cells whether it passed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import torch

from labsupport import netem
from labsupport.runtime.check import FAIL, PASS, CheckResult, report
from labsupport.runtime.check.agreement import tolerances
from labsupport.runtime.check.capstone import _remember, passed
from labsupport.runtime.check.messages import explain_failure, not_implemented
from labsupport.runtime.language import _

#: The grader's network: 100 µs and 5 MB/s per message, one NIC per rank: a unit's all-gather
#: takes about half of its 10 ms forward, so that what hides it and what does not are far apart.
NETWORK = netem.Network(inter=netem.Link(latency=100e-6, bandwidth=5e6), ranks_per_node=1)
RANKS = 4
STEPS = 3
__all__ = ["GRADE", "NETWORK", "RANKS", "check_zero3_forward", "passed"]


def _grade_config() -> Any:
    from labsupport.runtime.experiments.sharding_runs import Blocks

    # Four blocks of 64 features: 33 kB of float64 parameters each, 10 ms of emulated forward.
    return Blocks(hidden=64, layers=4, batch=16, compute_ms=40, dtype=torch.float64)


GRADE = _grade_config()


def grade_on_rank(zero3_class: Callable[..., Any]) -> dict[str, Any]:
    """On every rank: train against one process, then watch one forward and backward."""
    import torch.distributed as dist

    from labsupport.runtime import emulator
    from labsupport.runtime.experiments import sharding_runs as sr

    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    one = sr.baseline(GRADE, STEPS)
    out["gaps"] = sr.largest_gaps(sr.train(zero3_class, GRADE, STEPS), one)
    model, opt = sr.setup(zero3_class, GRADE)
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for k, block in enumerate(model.module):  # after the wrapper's own hooks: compute only
        block.register_forward_pre_hook(
            lambda _m, _a, k=k: starts.__setitem__(k, time.perf_counter())
        )
        block.register_forward_hook(
            lambda _m, _a, _o, k=k: ends.__setitem__(k, time.perf_counter())
        )
    x, y = sr._batch(GRADE, 0)
    sr.train_step(model, opt, (x, y), GRADE.loss)  # a first step: nothing left from building
    opt.zero_grad(set_to_none=True)
    dist.barrier()
    t0 = time.perf_counter()
    with emulator.operations() as ops:
        loss = GRADE.loss(model(x), y)
    out["forward"] = time.perf_counter() - t0
    out["held after forward"] = [u.full.untyped_storage().nbytes() > 0 for u in model.units]
    loss.backward()
    out["held after backward"] = [u.full.untyped_storage().nbytes() > 0 for u in model.units]
    out["gathers"] = [(op.issued - t0, op.end - t0) for op in ops if "gather" in op.name]
    out["starts"] = [starts[k] - t0 for k in sorted(starts)]
    out["ends"] = [ends[k] - t0 for k in sorted(ends)]
    out["unit bytes"] = model.units[0].full.numel() * model.units[0].full.element_size()
    return out


def _judge(name: str, runs: list[dict[str, Any]]) -> str | None:
    """The first thing wrong, as the message after FAIL (starting with ``name``), or None."""
    _rtol, atol, loss_rtol = tolerances(torch.float64)
    worst_loss = max(r["gaps"][0] for r in runs)
    worst_weight = max(r["gaps"][1] for r in runs)
    if worst_loss > loss_rtol or worst_weight > atol:
        problem = _(
            "{name}: the training drifted from one process's: loss {loss:.1e} relative, a "
            "weight {weight:.1e} apart (tolerance {loss_rtol:g}, {atol:g}). Does every unit "
            "gather before its forward (gather(async_op=False) waits for a prefetch in flight)?"
        )
        return problem.format(
            name=name, loss=worst_loss, weight=worst_weight, loss_rtol=loss_rtol, atol=atol
        )
    layers = len(runs[0]["held after forward"])
    for r in runs:
        kept = [k for k, held in enumerate(r["held after forward"][:-1]) if held]
        if kept:
            problem = _(
                "{name}: when forward returned, unit(s) {kept} still held their gathered "
                "parameters: free each unit once its forward is done (self.units[k].free()); "
                "only the last may stay, for backward."
            )
            return problem.format(name=name, kept=kept)
        if any(r["held after backward"]):
            problem = _(
                "{name}: when backward returned, some units still held their gathered parameters."
            )
            return problem.format(name=name)
    gather = netem.model_time("all_gather", "ring", runs[0]["unit bytes"], len(runs), NETWORK)
    f = GRADE.compute_ms / 1e3 / layers
    r0 = runs[0]
    if len(r0["gathers"]) < layers:
        problem = _("{name}: forward issued {issued} all-gathers for {layers} units.")
        return problem.format(name=name, issued=len(r0["gathers"]), layers=layers)
    for k in range(layers - 1):
        issued, end = r0["gathers"][k + 1]
        if issued >= r0["ends"][k]:
            problem = _(
                "{name}: unit {next}'s all-gather was issued at {issued:.1f} ms, after unit "
                "{k}'s compute ended ({ended:.1f} ms): nothing was left to hide it "
                "behind. Issue it (async_op=True) as unit {k} starts."
            )
            return problem.format(
                name=name, next=k + 1, issued=issued * 1e3, k=k, ended=r0["ends"][k] * 1e3
            )
        if r0["starts"][k] >= end:
            problem = _(
                "{name}: unit {k} began computing ({began:.1f} ms) only after unit "
                "{next}'s all-gather had arrived ({arrived:.1f} ms): it was waited for at "
                "once. Leave it in flight; unit k + 1's own before_forward waits for it."
            )
            return problem.format(
                name=name, k=k, began=r0["starts"][k] * 1e3, next=k + 1, arrived=end * 1e3
            )
    hidden, exposed = gather + layers * f, layers * (gather + f)
    slowest = max(r["forward"] for r in runs)
    if slowest > (hidden + exposed) / 2:
        problem = _(
            "{name}: forward took {slowest:.1f} ms (slowest rank); with the all-gathers hidden "
            "it takes about {hidden:.1f} ms, waiting for each about {exposed:.1f} ms."
        )
        return problem.format(
            name=name, slowest=slowest * 1e3, hidden=hidden * 1e3, exposed=exposed * 1e3
        )
    return None


@_remember
def check_zero3_forward(zero3_class: Callable[..., Any], timeout: float = 120.0) -> CheckResult:
    """Grade ``zero3_class`` (a :class:`labsupport.sharding.ZeRO3` with your forward moments)."""
    from labsupport.runtime.launch import Cluster, CollectiveTimeout, RankError

    name = getattr(zero3_class, "__name__", _("Your ZeRO-3"))
    try:
        with Cluster(RANKS, network=NETWORK, timeout=timeout) as cluster:
            runs = cluster.call(functools.partial(grade_on_rank, zero3_class), timeout=timeout)
    except (RankError, CollectiveTimeout) as err:
        if "NotImplementedError" in str(err):
            return not_implemented(name)
        hint = {"timeout": _("Does every rank gather the same units in the same order?")}
        return explain_failure(err, name, timeout, hints=hint)
    problem = _judge(name, runs)
    if problem:
        return report(False, f"{FAIL} {problem}")
    return report(
        True,
        f"{PASS} "
        + _(
            "{name}: the same losses and weights as one process at every step on all "
            "{world} ranks (float64); each unit freed after its forward (the last kept for "
            "backward); each next unit's all-gather issued before this unit's compute ends and "
            "left in flight, and the forward's time shows them hidden."
        ).format(name=name, world=len(runs)),
    )


#: Exercise -> (the class its cell defines, its grader).
EXERCISES = {"11.1": ("MyZeRO3", check_zero3_forward)}
