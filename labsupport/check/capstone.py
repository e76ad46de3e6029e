"""Graders for notebook 10 (the capstone), and a command that grades a folder of notebooks.

**In the notebook**: ``check_ddp(MyDDP)`` and ``check_zero1(MyZeRO1)``. Each trains a
small transformer (:data:`GRADE_CFG`) for :data:`STEPS` steps with your class on every
rank, next to the single-process baseline on the same global batches
(:func:`labsupport.capstone.compare.compare_steps`), and says at which step the two
first differ (initial weights, loss, gradients, AdamW's moments, weights), where,
and by how much, with a hint for the usual causes. It also checks the communication:
for DDP one ``all_reduce`` per bucket, issued during backward with ``async_op=True``,
for several bucket sizes; for ZeRO-1 no all-reduce of the gradients (a
reduce-scatter does), and each rank's optimizer state about 1/p of the model's.

**For an instructor**, over a folder of learners' notebooks (one ``.ipynb`` per
learner, or one sub-folder each), one line per learner and a CSV gradebook::

    python -m labsupport.check.capstone grade FOLDER [--ranks 4] [--limit 300]

Each learner's notebook runs in a process of its own with its own ranks, within a
time and a memory limit; the graders above decide in the grading process, which runs
none of the learners' code (:mod:`labsupport.check.notebooks`,
:mod:`labsupport.check.room`). From each notebook only the first code cell (the
imports) and the cells marked ``# Exercise 10.1`` and ``# Exercise 10.2`` run, so a
learner's class must not use names defined in other cells.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from labsupport import capstone, ddp
from labsupport.capstone import compare
from labsupport.check import FAIL, PASS, CheckResult, cluster_for_check, explain_failure, report
from labsupport.check.notebooks import grade_folder

#: The model the graders train: small, so that a check takes seconds on 4 ranks.
GRADE_CFG = capstone.Config(vocab=32, seq_len=16, d_model=32, heads=4, layers=2, batch=8)
STEPS = 4
#: Bucket sizes the DDP grader tries (bytes): 10 buckets for its model, and one bucket.
BUCKET_SIZES = (4096, 1 << 30)
_PASSED: dict[int, bool] = {}  # id(class) -> did its last check pass


def passed(answer: Any) -> bool:
    """True if the last check of this very class (or function) passed; for later cells."""
    return _PASSED.get(id(answer), False)


COLLECTIVES = ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "broadcast")


@contextlib.contextmanager
def counting_collectives() -> Iterator[list[tuple[str, int, bool, bool]]]:
    """Within the block, each call of a collective in :data:`COLLECTIVES` appends
    (name, elements, async_op, inside backward)."""
    import torch
    import torch.distributed as dist

    calls: list[tuple[str, int, bool, bool]] = []
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def counted(name: str, fn: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            numel = max((a.numel() for a in args if isinstance(a, torch.Tensor)), default=0)
            in_backward = torch._C._current_autograd_node() is not None
            calls.append((name, numel, bool(kwargs.get("async_op")), in_backward))
            return fn(*args, **kwargs)

        return wrapper

    for name, fn in originals.items():
        setattr(dist, name, counted(name, fn))
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def _run(make: Callable, bucket_bytes: int, sharded: bool) -> dict[str, Any]:
    """On every rank: compare with the baseline, counting the collectives of the steps."""
    with counting_collectives() as calls:
        out = compare.compare_steps(make, STEPS, GRADE_CFG, bucket_bytes, sharded)
    out["calls"] = [c for c in calls if c[0] != "broadcast"]  # the broadcast is in wrap()
    return out


def _buckets(bucket_bytes: int) -> list[list[str]]:
    """Parameter names per bucket, as notebook 07 groups them (reverse order)."""
    named = list(capstone.make_model(GRADE_CFG).named_parameters())[::-1]
    groups = ddp.make_buckets([p.numel() * 4 for _, p in named], bucket_bytes)
    return [[named[i][0] for i in g] for g in groups]


def _hint(found: dict[str, Any], world: int, bucket_bytes: int | None) -> str:
    """What usually causes this kind of difference."""
    what, ratio = found["what"], found.get("ratio", 1.0)
    if what == "initial weights":
        return (
            "The ranks do not start from the same weights: in wrap(), broadcast rank 0's "
            "parameters to every rank (dist.broadcast(p.data, 0)), as torch's DDP does."
        )
    if found.get("missing"):
        return "A parameter has no gradient after finish(): do not set param.grad to None."
    if what in ("gradients", "optimizer moments") and abs(ratio - world) < 0.05 * world:
        return (
            f"The result is {ratio:.2f}x the baseline's, about the world size ({world}): "
            "the gradients were summed, not averaged. Divide by the world size."
        )
    if what == "optimizer moments" and found["elements"] < found["want_elements"]:
        return (
            f"The ranks' optimizers hold state for {found['elements']} elements in all, the "
            f"model has {found['want_elements']}: every element must be in one rank's shard."
        )
    if what == "gradients" and len(found["names"]) < found["total"] and bucket_bytes:
        wrong = set(found["names"])
        buckets = _buckets(bucket_bytes)
        hit = [k for k, b in enumerate(buckets) if wrong & set(b)]
        if all(set(buckets[k]) <= wrong for k in hit):
            which = ", ".join(f"{k + 1}" for k in hit)
            return (
                f"Exactly the parameters of bucket {which} of {len(buckets)} (counting in the "
                "order backward fills them) differ; the others are right: was that bucket "
                "all-reduced, waited for and copied back? The last bucket, with the first "
                "layers, is the one most often missed."
            )
        return (
            "Only some gradients differ: are they all averaged before finish() returns, "
            "and copied back from the bucket's buffer?"
        )
    if what in ("gradients", "optimizer moments"):
        return (
            "Every rank seems to use a gradient of its own: all-reduce (or reduce-scatter) "
            "the gradients, divided by the world size, before the optimizer step."
        )
    if what == "weights":
        return (
            "The gradients were right but the weights after step() differ: is the "
            "optimizer stepped once per step, after finish(), and are the new weights "
            "all-gathered into every rank's parameters?"
        )
    return "The loss differs while the weights matched: is every rank's model the one trained?"


def describe(
    found: dict[str, Any], world: int, bucket_bytes: int | None = None, steps: int = STEPS
) -> str:
    """One paragraph: the first step that differs, where, by how much, and a hint."""
    step = found["step"]
    when = "before the first step" if step < 0 else f"at step {step} of {steps} (counting from 0)"
    who = "" if found.get("rank") is None else f" on rank {found['rank']}"
    if found["what"] == "loss":
        what = (
            f"the loss of the global batch is {found['got']:.6f}, one process gets "
            f"{found['want']:.6f} (difference {found['max_abs']:.2e})"
        )
    elif found["what"] == "optimizer moments":
        what = f"AdamW's first moment is {found['ratio']:.3g}x the baseline's (its size, all ranks)"
    else:
        names = found["names"]
        listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        what = (
            f"the {found['what']} of {len(names)} of {found['total']} parameters differ "
            f"({listed}); largest difference {found['max_abs']:.2e} in {found['worst']}"
        )
    return f"first difference {when}{who}: {what}.\n  {_hint(found, world, bucket_bytes)}"


def _collect(cluster: Any, jobs: list[tuple], name: str, timeout: float) -> tuple[Any, Any]:
    from labsupport.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster) as running:
            running.run(ddp.use_threads)
            return [running.call(_run, job, timeout=timeout) for job in jobs], None
    except (RankError, CollectiveTimeout) as err:
        hint = {"timeout": "Do all ranks issue the same collectives in the same order?"}
        return None, explain_failure(err, name, timeout, hints=hint)


def _tolerance() -> str:
    rtol, atol = compare.TOLERANCE["weights"]
    return f"weights within {atol:g} + {rtol:g}·|w|, losses within {compare.LOSS_RTOL:g} relative"


def _remember(grader: Callable) -> Callable:
    @functools.wraps(grader)
    def wrapper(answer: Any, *args: Any, **kwargs: Any) -> CheckResult:
        result = grader(answer, *args, **kwargs)
        _PASSED[id(answer)] = bool(result)
        return result

    return wrapper


@_remember
def check_ddp(
    version_class: Callable[[int], Any], cluster: Any = None, timeout: float = 120.0
) -> CheckResult:
    """Grade a bucketed, overlapped DDP class (built with ``bucket_bytes``) for several sizes."""
    name = version_class.__name__ if isinstance(version_class, type) else "Your DDP"
    jobs = [(functools.partial(version_class, b), b, False) for b in BUCKET_SIZES]
    runs, failed = _collect(cluster, jobs, name, timeout)
    if failed is not None:
        return failed
    for bucket_bytes, results in zip(BUCKET_SIZES, runs, strict=True):
        world = len(results)
        found = compare.first_divergence(results)
        label = f"{name}({bucket_bytes})"
        if found is not None:
            return report(False, f"{FAIL} {label}: {describe(found, world, bucket_bytes)}")
        want = len(_buckets(bucket_bytes))
        reduces = [c for c in results[0]["calls"] if c[0] == "all_reduce"]
        if len(reduces) != want * STEPS:
            return report(
                False,
                f"{FAIL} {label}: right weights, but {len(reduces) / STEPS:g} "
                f"all-reduce calls per step, expected {want} (one per bucket).",
            )
        if sum(1 for c in reduces if c[2] and c[3]) != want * STEPS:
            return report(
                False,
                f"{FAIL} {label}: right weights and call count, but the buckets "
                "were not all sent during backward with async_op=True.",
            )
    sizes = ", ".join(str(b) for b in BUCKET_SIZES)
    return report(
        True,
        f"{PASS} {name}: same losses, gradients and weights as one process at "
        f"each of {STEPS} steps on all {world} ranks ({_tolerance()}); one all-reduce "
        f"per bucket, during backward, for bucket sizes {sizes} bytes.",
    )


@_remember
def check_zero1(
    zero_class: Callable[[], Any], cluster: Any = None, timeout: float = 120.0
) -> CheckResult:
    """Grade a ZeRO-1 class (built with no arguments): the baseline's numbers, sharded state."""
    name = zero_class.__name__ if isinstance(zero_class, type) else "Your ZeRO-1"
    runs, failed = _collect(cluster, [(zero_class, 0, True)], name, timeout)
    if failed is not None:
        return failed
    results = runs[0]
    world = len(results)
    found = compare.first_divergence(results, sharded=True)
    if found is not None:
        return report(False, f"{FAIL} {name}: {describe(found, world)}")
    numel = GRADE_CFG.param_count()
    share = -(-numel // world)
    for r in results:
        held = r["moments"][-1][2]
        if held > share + world:
            return report(
                False,
                f"{FAIL} {name}: right weights, but rank {r['rank']}'s "
                f"optimizer keeps state for {held} of the {numel} elements; each rank "
                f"should keep about {share} (1/{world}): shard the optimizer state.",
            )
    big = [c for c in results[0]["calls"] if c[0] == "all_reduce" and c[1] > share]
    if big:
        return report(
            False,
            f"{FAIL} {name}: right weights and sharded state, but the "
            f"gradients go through all_reduce ({big[0][1]} elements): each rank needs "
            "only its shard's mean, which reduce_scatter_tensor gives for half the "
            "traffic of an all-reduce.",
        )
    return report(
        True,
        f"{PASS} {name}: same losses, AdamW moments and weights as one process at "
        f"each of {STEPS} steps on all {world} ranks ({_tolerance()}); each rank's "
        f"optimizer keeps state for 1/{world} of the parameters.",
    )


# ------------------------------------------------------------------ a folder of notebooks
#: Exercise -> (the class its cell defines, its grader).
EXERCISES = {"10.1": ("MyDDP", check_ddp), "10.2": ("MyZeRO1", check_zero1)}


def main(argv: list[str] | None = None) -> int:
    """``python -m labsupport.check.capstone grade PATH``: one line per learner, a gradebook;
    exit status 0 if every learner could be graded, 1 if not, 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m labsupport.check.capstone",
        description="Grade notebook 10 (capstone) notebooks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser(
        "grade", help="grade a folder of notebooks (or of one sub-folder per learner), or one"
    )
    grade.add_argument("path", type=Path, help="a folder of learners' notebooks, or one notebook")
    grade.add_argument("--ranks", type=int, default=4, help="ranks to train on (default 4)")
    grade.add_argument("--timeout", type=float, default=60.0,
                       help="seconds one check may run on the ranks (default 60)")  # fmt: skip
    grade.add_argument("--limit", type=float, default=300.0,
                       help="seconds for all that one notebook runs (default 300)")  # fmt: skip
    grade.add_argument("--memory", type=float, default=4.0,
                       help="GB one learner's processes may hold together (default 4)")  # fmt: skip
    grade.add_argument("--gradebook", type=Path, default=Path("grades.csv"),
                       help="the CSV written (default grades.csv)")  # fmt: skip
    grade.add_argument("--verbose", action="store_true", help="print every failure in full")
    args = parser.parse_args(argv)
    if not args.path.is_dir() and args.path.suffix != ".ipynb":
        parser.error(f"{args.path} is neither a folder nor a .ipynb file")
    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    if args.ranks < 1 or GRADE_CFG.batch % args.ranks:
        parser.error(f"--ranks must divide the graders' batch of {GRADE_CFG.batch}")
    if min(args.timeout, args.limit, args.memory) <= 0:
        parser.error("--timeout, --limit and --memory must be positive")
    try:
        everyone = grade_folder(args.path, EXERCISES, args.ranks, args.timeout, args.limit,
                                args.memory, args.gradebook, args.verbose)  # fmt: skip
    except FileNotFoundError as err:
        parser.error(str(err))
    return 0 if everyone else 1


if __name__ == "__main__":
    sys.exit(main())
