"""Graders for notebook 07: your overlapped DDP wrapper, and your bucketed one.

Your class is an ``nn.Module`` wrapper like :class:`labsupport.ddp.Overlapped` and
:class:`labsupport.ddp.Bucketed`: a subclass of :class:`labsupport.ddp.DDPBase`, built
as ``YourClass(module)`` (and ``bucket_cap_mb=...`` for the bucketed one). A grade has
two parts.

**The numbers**, on the cluster you pass (or the running one): the grader trains the
grading model of :mod:`labsupport.runtime.check.dataparallel` with it on every rank, next
to one process on the whole batch, and checks, element by element and step by step:

* the parameters and buffers once wrapped (each rank built its model from its own seed);
* every gradient **when backward returns**, the optimizer's state and the weights, in
  float64, for several bucket caps (one smaller than every tensor); gradient
  accumulation under ``no_sync()``; a parameter forward never uses (an error that
  names it, and training with ``find_unused_parameters=True``).

**The overlap, by time**, on the grader's own clock
(:mod:`labsupport.runtime.check.overlap_timing`): its network, its compute model (2 ms of
emulated compute in each layer's backward), and the operations its emulated process group
executed. One all-reduce per parameter (overlapped) or per bucket in bucket order
(bucketed); each issued within ε = 0.5 ms of the moment it could leave (its gradients
ready, the bucket before it sent); no hook returning later than ε after its gradient was
ready (a wait inside backward, through the Work, its future, or ``async_op=False``,
fails). If your cluster does not emulate a network, the grader starts one of the same
size that does, for this part.
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
    overlap_timing,
    report,
)
from labsupport.runtime.check.dataparallel import (
    GRADE,
    STEPS,
    ddp_cases,
    expected_bucket_names,
    expected_buckets,
    timed_cases,
)
from labsupport.runtime.check.ddp_judge import steps_differ, tolerance_words
from labsupport.runtime.check.messages import LABELLED
from labsupport.runtime.language import N_, _

#: Bucket caps (MiB) the bucketed grader tries: smaller than every tensor (a bucket each),
#: two buckets of which the last is ready first, and torch's default (one bucket here).
BUCKET_CAPS = (1e-6, 0.001, None)

#: What a PASS says of the overlap (the rules of :mod:`labsupport.runtime.check.overlap_timing`).
OVERLAP_PASSED = {
    "parameter": N_(
        "On the grader's network and compute model, one all-reduce per parameter, each "
        "issued within 0.5 ms of its gradient being ready, and no hook waited: the "
        "all-reduces travel while backward computes."
    ),
    "bucket": N_(
        "On the grader's network and compute model, one all-reduce per bucket, in bucket "
        "order, each issued within 0.5 ms of the moment it could leave, and no hook "
        "waited: the buckets travel while backward computes."
    ),
}


#: What an unused parameter must cause, as whole sentences.
UNUSED = {
    "unused, none": N_(
        "{name}: a trainable parameter forward never uses (spare.weight) must make the "
        "gradient synchronization raise an error that names it; none was raised. (torch's "
        "DDP raises one too, at the next forward, with the parameter's index, and its name "
        "under TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL.)"
    ),
    "unused, other": N_(
        "{name}: a trainable parameter forward never uses (spare.weight) must make the "
        "gradient synchronization raise an error that names it; the error was: {error}"
    ),
}

#: Why the overlap could not be judged, as whole sentences.
NOT_JUDGED = {
    "one rank": N_(
        "{name}: overlap not judged: on one rank an all-reduce takes no time, so a wait "
        "for it cannot be seen. Grade on 2 ranks or more."
    ),
    "remote": N_(
        "{name}: overlap not judged: the cluster the grader was given does not emulate a "
        "network and is not one it can start another beside. Start its ranks with "
        "network=labsupport.runtime.check.overlap_timing.NETWORK."
    ),
}


def collect(cluster: Any, job: Callable, name: str, timeout: float) -> tuple[Any, Any]:
    """(each rank's result of ``job()``, None), or (None, the failure as a CheckResult).

    With ``cluster=None`` and no cluster running, a temporary one on the grader's network.
    """
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster, network=overlap_timing.NETWORK) as running:
            return running.call(job, timeout=timeout), None
    except (RankError, CollectiveTimeout) as err:
        hint = {"timeout": N_("Do all ranks issue the same all-reduces in the same order?")}
        return None, explain_failure(err, name, timeout, hints=hint)


def timed_runs(
    cluster: Any, make: Callable, caps: list | None, name: str, timeout: float
) -> tuple[Any, Any]:
    """(each rank's :func:`timed_cases`, None), or (None, why not as a CheckResult).

    On ``cluster`` if it emulates a network (the grader's is set for the run, then the
    cluster's put back); else on a temporary emulated cluster of the same size.
    """
    from labsupport.runtime.launch import Cluster, current_cluster

    job = functools.partial(timed_cases, make, caps)
    runs, failed = collect(cluster, job, name, timeout)
    if failed is not None or runs[0] is not None:
        return runs, failed
    world = len(runs)
    if world < 2:
        return None, report(False, f"{FAIL} " + _(NOT_JUDGED["one rank"]).format(name=name))
    here = current_cluster() if cluster is None else cluster
    if not isinstance(here, Cluster):
        return None, report(False, f"{FAIL} " + _(NOT_JUDGED["remote"]).format(name=name))
    with Cluster(world, network=overlap_timing.NETWORK, timeout=here.options.timeout) as own:
        return collect(own, job, name, timeout)


def overlap_failure(
    cluster: Any, make: Callable, caps: list | None, name: str, timeout: float
) -> CheckResult | None:
    """The overlap part of a grade: :func:`timed_runs`, then :func:`judge_overlap`.

    None if every rule holds; else the FAIL (or why it could not be judged).
    """
    runs, failed = timed_runs(cluster, make, caps, name, timeout)
    if failed is not None:
        return failed
    problem = judge_overlap(name, runs, caps)
    return report(False, f"{FAIL} {problem}") if problem else None


def judge_overlap(name: str, runs: list[list], caps: list | None) -> str | None:
    """The first overlap rule broken for any cap (each rank's :func:`timed_cases`), or None."""
    params = [p.numel() for p in trainable(GRADE.make_model())]
    for k, cap in enumerate(caps or [None]):
        per_rank = [r[k] for r in runs]
        label = name if caps is None else f"{name}(bucket_cap_mb={cap})"
        if caps is None:
            problem = overlap_timing.judge(per_rank, None, params)
        else:
            names = expected_bucket_names(cap)
            problem = overlap_timing.judge(per_rank, names, expected_buckets(cap))
        if problem:
            return _(LABELLED).format(label=label, problem=problem)
    return None


def _per_rank(runs: list[dict[str, Any]], key: str) -> list[Any]:
    return [r[key] for r in runs]


def judge_wrapper(
    name: str, runs: list[dict[str, Any]], caps: list | None, extra_cap: float | None = None
) -> str | None:
    """The first number wrong in a wrapper's cases (each rank's :func:`ddp_cases`), or None."""
    for k, (cap, _results) in enumerate(runs[0]["caps"]):
        results = [r["caps"][k][1] for r in runs]
        label = name if caps is None else f"{name}(bucket_cap_mb={cap})"
        problem = steps_differ(results, STEPS)
        if problem:
            return _(LABELLED).format(label=label, problem=problem)
    accumulate = _per_rank(runs, "accumulate")
    problem = steps_differ(accumulate, 2)
    if problem:
        return _(
            "{name}, gradient accumulation (the first micro-batch under no_sync()): {problem}"
        ).format(name=name, problem=problem)
    error = runs[0]["unused_error"]
    if error is None or "spare" not in error:
        key = "unused, none" if error is None else "unused, other"
        return _(UNUSED[key]).format(name=name, error=error)
    problem = steps_differ(_per_rank(runs, "find_unused"), 2)
    if problem:
        return _("{name}(find_unused_parameters=True), with an unused parameter: {problem}").format(
            name=name, problem=problem
        )
    if "extra" in runs[0]:
        extra = _per_rank(runs, "extra")
        problem = steps_differ(extra, STEPS)
        if problem:
            return _("{name}(bucket_cap_mb={cap}), the transformer: {problem}").format(
                name=name, cap=extra_cap, problem=problem
            )
    return None


def grade_wrapper(
    cluster: Any,
    make: Callable,
    job: Callable,
    caps: list | None,
    name: str,
    timeout: float,
    extra_cap: float | None = None,
) -> tuple[list, CheckResult | None]:
    """A DDP wrapper graded up to its PASS: ``job``'s cases on the ranks (:func:`collect`),
    their numbers (:func:`judge_wrapper`), then the overlap of ``make`` (:func:`overlap_failure`).

    The ranks' runs, and None if every part holds, else the FAIL.
    """
    runs, failed = collect(cluster, job, name, timeout)
    if failed is not None:
        return runs, failed
    problem = judge_wrapper(name, runs, caps, extra_cap)
    if problem:
        return runs, report(False, f"{FAIL} {problem}")
    return runs, overlap_failure(cluster, make, caps, name, timeout)


def check_overlapped(
    wrapper_class: Callable[..., Any], cluster: Any = None, timeout: float = 90.0
) -> CheckResult:
    """Grade the overlapped wrapper (one all-reduce per parameter, issued from its hook)."""
    name = getattr(wrapper_class, "__name__", "Overlapped")
    job = functools.partial(ddp_cases, wrapper_class, None)
    runs, failed = grade_wrapper(cluster, wrapper_class, job, None, name, timeout)
    if failed is not None:
        return failed
    numbers = _(
        "{name}: the same gradients (when backward returns), AdamW state and weights as one "
        "process at every step on all {world} ranks ({tolerances}); accumulation with "
        "no_sync(); unused parameters. {timing}"
    ).format(
        name=name, world=len(runs), tolerances=tolerance_words(),
        timing=_(OVERLAP_PASSED["parameter"]),
    )  # fmt: skip
    return report(True, f"{PASS} {numbers}")


def check_bucketed(
    wrapper_class: Callable[..., Any], cluster: Any = None, timeout: float = 90.0
) -> CheckResult:
    """Grade the bucketed wrapper (``bucket_cap_mb``) for the caps in :data:`BUCKET_CAPS`."""
    name = getattr(wrapper_class, "__name__", "Bucketed")
    job = functools.partial(ddp_cases, wrapper_class, list(BUCKET_CAPS))
    runs, failed = grade_wrapper(cluster, wrapper_class, job, list(BUCKET_CAPS), name, timeout)
    if failed is not None:
        return failed
    numbers = _(
        "{name}: the same gradients, AdamW state and weights as one process at every step on "
        "all {world} ranks ({tolerances}), for bucket_cap_mb = {caps}; accumulation with "
        "no_sync(); unused parameters. {timing}"
    ).format(
        name=name, world=len(runs), tolerances=tolerance_words(),
        caps=", ".join(str(c) for c in BUCKET_CAPS), timing=_(OVERLAP_PASSED["bucket"]),
    )  # fmt: skip
    return report(True, f"{PASS} {numbers}")
