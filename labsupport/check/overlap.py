"""Graders for notebook 07: the hook-based overlapped data-parallel version, and the bucketed one.

Your version is a class like :class:`labsupport.ddp.Overlapped`: ``wrap(model)``
registers hooks and returns the model, ``finish()`` waits, and afterwards every
``param.grad`` holds the mean of the ranks' gradients. The grader trains a small
MLP for a few steps with it on every rank and compares, with the single-process
baseline on the same global batch (:func:`labsupport.ddp.baseline`):

* the last step's gradients and the final weights (within float tolerance);
* that the all-reduces were issued *during* backward (``dist.all_reduce`` with
  ``async_op=True`` before ``finish()`` was called): otherwise nothing overlaps;
* for the bucketed version, the number of ``dist.all_reduce`` calls per step for
  several bucket sizes: one per bucket, as :func:`labsupport.ddp.make_buckets` groups
  the parameters in reverse order.

Calls are counted by wrapping ``torch.distributed.all_reduce`` while your code runs,
so call it as ``dist.all_reduce(...)`` (or through ``trace.comm(dist.all_reduce, ...)``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from labsupport import ddp
from labsupport.check import (
    FAIL,
    PASS,
    CheckResult,
    cluster_for_check,
    describe_difference,
    explain_failure,
    report,
)

#: The model the graders train: small, so a check takes a second or two on 4 ranks.
CFG = ddp.Config(in_features=32, hidden=64, layers=3, out_features=8, batch=16)
STEPS = 3
#: Bucket sizes the bucketed grader tries (bytes): one per parameter, a few, one bucket.
BUCKET_SIZES = (1, 2000, 4096, 1 << 30)


@contextlib.contextmanager
def counting_all_reduce() -> Iterator[list[tuple[bool, bool]]]:
    """Within the block, every ``dist.all_reduce`` call appends (async_op, inside backward)."""
    import torch
    import torch.distributed as dist

    calls: list[tuple[bool, bool]] = []
    original = dist.all_reduce

    def counted(*args: Any, **kwargs: Any) -> Any:
        in_backward = torch._C._current_autograd_node() is not None
        calls.append((bool(kwargs.get("async_op", False)), in_backward))
        return original(*args, **kwargs)

    dist.all_reduce = counted
    try:
        yield calls
    finally:
        dist.all_reduce = original


def _run(make_version: Callable[[], Any], steps: int) -> dict[str, Any]:
    """On every rank: train with the learner's version, counting all-reduce calls."""
    with counting_all_reduce() as calls:
        out = ddp.train(make_version, steps, CFG)
    out["async_in_backward"] = sum(1 for a, b in calls if a and b)
    out["all_calls"] = len(calls)
    return out


def _compare(results: list[dict], expected: dict, name: str) -> CheckResult | None:
    for rank, got in enumerate(results):
        for key, words in (("grads", "gradients after the last step"),
                           ("weights", "weights after training")):  # fmt: skip
            diff = describe_difference(expected[key], got[key], rtol=1e-4, atol=1e-5)
            if diff:
                return report(
                    False,
                    f"{FAIL} {name}, rank {rank}: the {words} differ from one process training "
                    f"on the whole batch: {diff}. Does every hook average param.grad (divide by "
                    "the world size, all-reduce) and does finish() wait for every handle?",
                )
    return None


def _collect(cluster: Any, jobs: Sequence[tuple[Callable, int]], name: str, timeout: float):
    from labsupport.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster) as running:
            return [running.call(_run, job, timeout=timeout) for job in jobs], None
    except (RankError, CollectiveTimeout) as err:
        hint = {"timeout": " Do all ranks issue the same all-reduces in the same order?"}
        return None, explain_failure(err, name, timeout, hints=hint)


def check_overlapped(version_class: Callable[[], Any], cluster: Any = None,
                     timeout: float = 60.0) -> CheckResult:  # fmt: skip
    """Grade the hook-based overlapped version (a class built with no arguments)."""
    name = "Overlapped"
    runs, failed = _collect(cluster, [(version_class, STEPS)], name, timeout)
    if failed is not None:
        return failed
    results = runs[0]
    wrong = _compare(results, ddp.baseline(STEPS, CFG), name)
    if wrong is not None:
        return wrong
    n_params = len(list(ddp.make_model(CFG).parameters()))
    got = results[0]["async_in_backward"]
    if got < n_params * STEPS:
        return report(
            False,
            f"{FAIL} {name}: the gradients are right, but only {got} of {n_params * STEPS} "
            "all-reduces were issued during backward with async_op=True: issue each one from "
            "the hook, asynchronously, and wait in finish().",
        )
    return report(True, f"{PASS} {name}: same gradients and weights as one process on all "
                  f"{len(results)} ranks; {got} all-reduces issued during backward.")  # fmt: skip


def check_bucketed(version_class: Callable[[int], Any], cluster: Any = None,
                   timeout: float = 60.0) -> CheckResult:  # fmt: skip
    """Grade the bucketed version (a class built with ``bucket_bytes``), for several sizes."""
    import functools

    name = "Bucketed"
    jobs = [(functools.partial(version_class, b), STEPS) for b in BUCKET_SIZES]
    runs, failed = _collect(cluster, jobs, name, timeout)
    if failed is not None:
        return failed
    expected = ddp.baseline(STEPS, CFG)
    sizes = [p.numel() * p.element_size() for p in ddp.make_model(CFG).parameters()][::-1]
    for bucket_bytes, results in zip(BUCKET_SIZES, runs, strict=True):
        wrong = _compare(results, expected, f"{name}({bucket_bytes})")
        if wrong is not None:
            return wrong
        want = len(ddp.make_buckets(sizes, bucket_bytes))
        calls = results[0]["all_calls"] / STEPS
        if calls != want:
            return report(
                False,
                f"{FAIL} {name}({bucket_bytes}): {calls:g} all-reduce calls per step, expected "
                f"{want} (one per bucket; parameters in reverse order, a bucket closes once it "
                f"holds at least bucket_bytes; gradient sizes in that order: {sizes}).",
            )
        if results[0]["async_in_backward"] != want * STEPS:
            return report(
                False,
                f"{FAIL} {name}({bucket_bytes}): right gradients and call count, but the "
                "buckets were not all sent during backward with async_op=True.",
            )
    sizes_text = ", ".join(str(b) for b in BUCKET_SIZES)
    return report(True, f"{PASS} {name}: same gradients and weights as one process, and one "
                  f"all-reduce per bucket, for bucket sizes {sizes_text} bytes.")  # fmt: skip
