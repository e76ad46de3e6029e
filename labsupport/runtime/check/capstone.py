"""Graders for notebook 10 (the capstone).

**In the notebook**: ``check_ddp(MyDDP)`` and ``check_zero1(MyZeRO1)``.

* ``MyDDP`` is a bucketed DDP wrapper (a subclass of :class:`labsupport.ddp.DDPBase`, built
  as ``MyDDP(module, bucket_cap_mb=...)``). It is graded as notebook 07's bucketed
  wrapper is (:mod:`labsupport.runtime.check.overlap`: the grading model with tied, frozen
  and unused parameters and a buffer, several bucket caps, accumulation; then, on the
  grader's own network and compute model, one all-reduce per bucket in bucket order, each
  issued as soon as it could leave and none waited for during backward), and its numbers
  on the capstone's transformer too.
* ``MyZeRO1`` is a ZeRO-1 optimizer (a subclass of :class:`labsupport.ddp.ZeRO1Base`,
  built as ``MyZeRO1(params, optimizer_class, **defaults)``). It trains the transformer
  in float64 with AdamW's defaults and two parameter groups, the grading model with its
  frozen layer, with gradient accumulation, and under a DDP wrapper; on every rank, at
  every step, **its shard** of the averaged gradient and AdamW's two moments are compared
  element by element with one process's (:func:`labsupport.runtime.capstone.optimizer_view`),
  then every weight; the ranks' shards must cover every trainable element once, 1/p each;
  and a step must reduce-scatter and all-gather, not all-reduce the gradient.

Each says at which step the run first left one process's numbers, where, by how much,
and what usually causes that. ``passed(answer)`` tells later cells whether it passed.

**For an instructor**: ``python -m labkit.capstone grade FOLDER`` grades a folder of
learners' notebooks with these graders (the instructor's kit, :mod:`labkit.capstone`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from labsupport.runtime.check import FAIL, PASS, CheckResult, report
from labsupport.runtime.check.dataparallel import GPT_GRADE, GRADE, ddp_cases, zero_cases
from labsupport.runtime.check.ddp_judge import steps_differ, tolerance_words, zero_calls
from labsupport.runtime.check.overlap import (
    BUCKET_CAPS,
    OVERLAP_PASSED,
    collect,
    grade_wrapper,
)
from labsupport.runtime.language import N_, _

#: The bucket cap (MiB) for the transformer: a few buckets of its float64 gradients.
GPT_CAP = 0.05
#: The graders' global batch (every --ranks must divide it).
GRADE_BATCH = GRADE.batch
_PASSED: dict[int, bool] = {}  # id(class) -> did its last check pass


def passed(answer: Any) -> bool:
    """True if the last check of this very class (or function) passed; for later cells."""
    return _PASSED.get(id(answer), False)


def _remember(grader: Callable) -> Callable:
    @functools.wraps(grader)
    def wrapper(answer: Any, *args: Any, **kwargs: Any) -> CheckResult:
        result = grader(answer, *args, **kwargs)
        _PASSED[id(answer)] = bool(result)
        return result

    return wrapper


@_remember
def check_ddp(
    ddp_class: Callable[..., Any], cluster: Any = None, timeout: float = 120.0
) -> CheckResult:
    """Grade a bucketed DDP wrapper (``ddp_class(module, bucket_cap_mb=...)``)."""
    name = getattr(ddp_class, "__name__", None) or _("Your DDP")
    job = functools.partial(ddp_cases, ddp_class, list(BUCKET_CAPS), (GPT_GRADE, GPT_CAP))
    caps = list(BUCKET_CAPS)
    runs, failed = grade_wrapper(cluster, ddp_class, job, caps, name, timeout, GPT_CAP)
    if failed is not None:
        return failed
    numbers = _(
        "{name}: the same gradients, AdamW state and weights as one process at every step on "
        "all {world} ranks ({tolerances}), on the grading model and the transformer; "
        "accumulation with no_sync(); unused parameters. {timing}"
    ).format(
        name=name, world=len(runs), tolerances=tolerance_words(),
        timing=_(OVERLAP_PASSED["bucket"]),
    )  # fmt: skip
    return report(True, f"{PASS} {numbers}")


#: The ZeRO-1 cases (:func:`~labsupport.runtime.check.dataparallel.zero_cases`), named for a
#: FAIL message: "MyZeRO1, <the case>: <what differs>".
_ZERO_CASES = {
    # translators: a ZeRO-1 case, shown as "MyZeRO1, <case>: <what differs>"
    "transformer": N_("the transformer"),
    # translators: a ZeRO-1 case, shown as "MyZeRO1, <case>: <what differs>"
    "frozen": N_("the grading model (tied embedding, a frozen layer)"),
    # translators: a ZeRO-1 case, shown as "MyZeRO1, <case>: <what differs>"
    "accumulate": N_("gradient accumulation (two backward passes per step)"),
    # translators: a ZeRO-1 case, shown as "MyZeRO1, <case>: <what differs>"
    "under ddp": N_("under a bucketed DDP wrapper"),
}


@_remember
def check_zero1(
    zero_class: Callable[..., Any], cluster: Any = None, timeout: float = 120.0
) -> CheckResult:
    """Grade a ZeRO-1 optimizer (``zero_class(params, optimizer_class, **defaults)``)."""
    name = getattr(zero_class, "__name__", None) or _("Your ZeRO-1")
    runs, failed = collect(cluster, functools.partial(zero_cases, zero_class), name, timeout)
    if failed is not None:
        return failed
    for key, words in _ZERO_CASES.items():
        results = [r[key] for r in runs]
        steps = len(results[0]["losses"])
        total = sum(results[0]["sizes"])
        problem = steps_differ(results, steps) or zero_calls(results, total, key == "under ddp")
        if problem:
            # translators: {case} is one of the ZeRO-1 cases (e.g. "the transformer")
            failed = _("{name}, {case}: {problem}").format(
                name=name, case=_(words), problem=problem
            )
            return report(False, f"{FAIL} {failed}")
    verdict = _(
        "{name}: on all {world} ranks, at every step, its shard of the mean gradient and "
        "AdamW's two moments equal one process's element by element, and so do the weights "
        "({tolerances}); each rank steps 1/{world} of the elements, every one exactly once; "
        "reduce-scatter and all-gather, no all-reduce; parameter groups, a frozen layer, "
        "accumulation, and under DDP."
    ).format(name=name, world=len(runs), tolerances=tolerance_words())
    return report(True, f"{PASS} {verdict}")


# ------------------------------------------------------------------ a folder of notebooks
#: Exercise -> (the class its cell defines, its grader).
EXERCISES = {"10.1": ("MyDDP", check_ddp), "10.2": ("MyZeRO1", check_zero1)}
