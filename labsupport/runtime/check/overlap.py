"""Graders for notebook 07: your overlapped DDP wrapper, and your bucketed one.

Your class is an ``nn.Module`` wrapper like :class:`labsupport.ddp.Overlapped` and
:class:`labsupport.ddp.Bucketed`: a subclass of :class:`labsupport.ddp.DDPBase`, built
as ``YourClass(module)`` (and ``bucket_cap_mb=...`` for the bucketed one). The grader
trains the grading model of :mod:`labsupport.runtime.check.dataparallel` with it on every rank,
next to one process on the whole batch, and checks, element by element and step by step:

* the parameters and buffers once wrapped (each rank built its model from its own seed);
* every gradient **when backward returns**, the optimizer's state and the weights, in
  float64, for several bucket caps (one smaller than every tensor); gradient
  accumulation under ``no_sync()``; a parameter forward never uses (an error that
  names it, and training with ``find_unused_parameters=True``);
* the all-reduces of each step: one per parameter (overlapped) or one per bucket in
  bucket order (bucketed), each issued during backward with ``async_op=True``, and in
  flight together: an all-reduce waited for inside the hook hides nothing and fails.

Collectives are seen through ``torch.distributed`` (:func:`labsupport.runtime.trace.collectives`):
call them as ``dist.all_reduce(...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from labsupport.ddp.buckets import trainable
from labsupport.runtime.check import (
    FAIL,
    PASS,
    CheckResult,
    cluster_for_check,
    explain_failure,
    report,
)
from labsupport.runtime.check.dataparallel import GRADE, STEPS, ddp_cases, expected_buckets
from labsupport.runtime.check.ddp_judge import ddp_calls, steps_differ, tolerance_words

#: Bucket caps (MiB) the bucketed grader tries: smaller than every tensor (a bucket each),
#: two buckets of which the last is ready first, and torch's default (one bucket here).
BUCKET_CAPS = (1e-6, 0.001, None)


def collect(cluster: Any, job: Callable, name: str, timeout: float) -> tuple[Any, Any]:
    """(each rank's result of ``job()``, None), or (None, the failure as a CheckResult)."""
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster) as running:
            return running.call(job, timeout=timeout), None
    except (RankError, CollectiveTimeout) as err:
        hint = {"timeout": "Do all ranks issue the same all-reduces in the same order?"}
        return None, explain_failure(err, name, timeout, hints=hint)


def _per_rank(runs: list[dict[str, Any]], key: str) -> list[Any]:
    return [r[key] for r in runs]


def judge_wrapper(
    name: str, runs: list[dict[str, Any]], caps: list | None, extra_cap: float | None = None
) -> str | None:
    """The first thing wrong with a wrapper's cases (each rank's :func:`ddp_cases`), or None."""
    params = [p.numel() for p in trainable(GRADE.make_model())]
    for k, (cap, _) in enumerate(runs[0]["caps"]):
        results = [r["caps"][k][1] for r in runs]
        label = name if caps is None else f"{name}(bucket_cap_mb={cap})"
        problem = steps_differ(results, STEPS)
        buckets = None if caps is None else expected_buckets(cap)
        problem = problem or ddp_calls(results, buckets, params)
        if problem:
            return f"{label}: {problem}"
    accumulate = _per_rank(runs, "accumulate")
    problem = steps_differ(accumulate, 2)
    if problem:
        return f"{name}, gradient accumulation (the first micro-batch under no_sync()): {problem}"
    error = runs[0]["unused_error"]
    if error is None or "spare" not in error:
        return (
            f"{name}: a trainable parameter forward never uses (spare.weight) must make "
            "backward raise an error that names it, as torch's DDP does; "
            + ("none was raised." if error is None else f"the error was: {error}")
        )
    problem = steps_differ(_per_rank(runs, "find_unused"), 2)
    if problem:
        return f"{name}(find_unused_parameters=True), with an unused parameter: {problem}"
    if "extra" in runs[0]:
        extra = _per_rank(runs, "extra")
        problem = steps_differ(extra, STEPS)
        if problem:
            return f"{name}(bucket_cap_mb={extra_cap}), the transformer: {problem}"
    return None


def check_overlapped(
    wrapper_class: Callable[..., Any], cluster: Any = None, timeout: float = 90.0
) -> CheckResult:
    """Grade the overlapped wrapper (one all-reduce per parameter, issued from its hook)."""
    name = getattr(wrapper_class, "__name__", "Overlapped")
    runs, failed = collect(
        cluster, functools.partial(ddp_cases, wrapper_class, None), name, timeout
    )
    if failed is not None:
        return failed
    problem = judge_wrapper(name, runs, None)
    if problem:
        return report(False, f"{FAIL} {problem}")
    return report(
        True,
        f"{PASS} {name}: the same gradients (when backward returns), AdamW state and "
        f"weights as one process at every step on all {len(runs)} ranks "
        f"({tolerance_words()}); one all-reduce per parameter, issued during backward and "
        "in flight together; accumulation with no_sync(); unused parameters.",
    )


def check_bucketed(
    wrapper_class: Callable[..., Any], cluster: Any = None, timeout: float = 90.0
) -> CheckResult:
    """Grade the bucketed wrapper (``bucket_cap_mb``) for the caps in :data:`BUCKET_CAPS`."""
    name = getattr(wrapper_class, "__name__", "Bucketed")
    job = functools.partial(ddp_cases, wrapper_class, list(BUCKET_CAPS))
    runs, failed = collect(cluster, job, name, timeout)
    if failed is not None:
        return failed
    problem = judge_wrapper(name, runs, list(BUCKET_CAPS))
    if problem:
        return report(False, f"{FAIL} {problem}")
    caps = ", ".join(str(c) for c in BUCKET_CAPS)
    return report(
        True,
        f"{PASS} {name}: the same gradients, AdamW state and weights as one process at every "
        f"step on all {len(runs)} ranks ({tolerance_words()}), for bucket_cap_mb = {caps}; "
        "one all-reduce per bucket, in bucket order, issued during backward and in flight "
        "together; accumulation with no_sync(); unused parameters.",
    )
