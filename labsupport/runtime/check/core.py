"""Running your function next to a reference, on every rank or here, and grading the result."""

from __future__ import annotations

import contextlib
import copy
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from labsupport.runtime.check.messages import (
    FAIL,
    PASS,
    CheckResult,
    describe_difference,
    explain_failure,
    not_implemented,
    per_rank_message,
    report,
    short_repr,
)
from labsupport.runtime.language import N_, _


def _to_cpu(value: Any) -> Any:
    """Results as CPU tensors (device tensors must not travel back to the kernel)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def cluster_for_check(
    cluster: Any = None, world_size: int | None = None, network: Any = None
) -> Iterator[Any]:
    """The cluster a check runs on: ``cluster``, else the running one (``%%ranks``'s) if its
    size fits ``world_size``, else a temporary one of ``world_size`` (default 4) ranks, on
    ``network`` if given."""
    from labsupport.runtime.launch import Cluster, current_cluster

    owned = None
    if cluster is None:
        cluster = current_cluster()
        if cluster is None or (world_size is not None and cluster.world_size != world_size):
            cluster = owned = Cluster(world_size=world_size or 4, network=network)
    try:
        yield cluster
    finally:
        if owned is not None:
            owned.shutdown()


def _trial(fn: Callable, reference: Callable, make_args: Callable) -> tuple[Any, Any]:
    """On one rank: the reference's result, then the learner's (the learner's runs last,
    so a wrong sequence of collectives cannot spoil the reference)."""
    import torch.distributed as dist

    args = make_args(dist.get_rank(), dist.get_world_size())
    expected = _to_cpu(reference(*copy.deepcopy(args)))
    dist.barrier()
    got = _to_cpu(fn(*copy.deepcopy(args)))
    return expected, got


def check_on_ranks(
    fn: Callable,
    reference: Callable,
    make_args: Callable[[int, int], tuple],
    *,
    name: str = N_("Your function"),
    cluster: Any = None,
    world_size: int | None = None,
    timeout: float = 30.0,
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    hints: dict[str, str] | None = None,
) -> CheckResult:
    """Run ``reference`` and ``fn`` on every rank with ``make_args(rank, world_size)``; compare.

    ``hints`` maps an exception type name, or ``"timeout"``, to one line of advice added
    when the run ends that way (see :func:`explain_failure`).

    ``cluster``: the Cluster to use; by default the running one (``%%ranks``'s), or a
    temporary one of ``world_size`` (default 4) ranks. A cluster of another size than
    ``world_size`` is not reused.
    """
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    name = _(name)
    try:
        with cluster_for_check(cluster, world_size) as running:
            results = running.call(_trial, (fn, reference, make_args), timeout=timeout)
    except (RankError, CollectiveTimeout) as err:
        return explain_failure(err, name, timeout, hints=hints)
    differences = {
        rank: describe_difference(expected, got, exact=exact, rtol=rtol, atol=atol)
        for rank, (expected, got) in enumerate(results)
    }
    wrong = {rank: text for rank, text in differences.items() if text}
    if wrong:
        return report(False, per_rank_message(name, wrong, len(results)))
    return report(
        True,
        f"{PASS} "
        + _("{name}: matches the reference on all {count} ranks.").format(
            name=name, count=len(results)
        ),
    )


def check_function(
    fn: Callable,
    reference: Callable,
    cases: Sequence[tuple],
    *,
    name: str = N_("Your function"),
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> CheckResult:
    """Call ``fn(*case)`` and ``reference(*case)`` here (no ranks) for each case; compare."""
    name = _(name)
    for case in cases:
        try:
            got = fn(*copy.deepcopy(case))
        except NotImplementedError:
            return not_implemented(name)
        except Exception as exc:  # the learner's bug, reported kindly
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = _("{name}{case} raised {type}: {error}\n  at line {line}: `{code}`")
            return report(
                False,
                f"{FAIL} "
                + message.format(
                    name=name, case=short_repr(tuple(case)), type=type(exc).__name__, error=exc,
                    line=where.lineno, code=where.line,
                ),
            )  # fmt: skip
        expected = reference(*copy.deepcopy(case))
        difference = describe_difference(expected, got, exact=exact, rtol=rtol, atol=atol)
        if difference:
            return report(False, f"{FAIL} {name}{short_repr(tuple(case))}: {difference}")
    return report(
        True,
        f"{PASS} " + _("{name}: right on all {count} cases.").format(name=name, count=len(cases)),
    )


def check_values(
    predicted: Callable[[], Any] | Any,
    actual: Sequence[Any],
    *,
    name: str = N_("Your prediction"),
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> CheckResult:
    """Compare per-rank ``actual`` values with ``predicted`` (a list, or a function giving one)."""
    name = _(name)
    if callable(predicted):
        try:
            predicted = predicted()
        except NotImplementedError:
            return not_implemented(name)
    if not isinstance(predicted, list | tuple) or len(predicted) != len(actual):
        return report(
            False,
            f"{FAIL} "
            + _("{name}: expected one entry per rank ({count}), got {got}").format(
                name=name, count=len(actual), got=short_repr(predicted)
            ),
        )
    wrong = {}
    for rank, (want, got) in enumerate(zip(actual, predicted, strict=True)):
        if isinstance(want, torch.Tensor) and not isinstance(got, torch.Tensor):
            try:  # a plain list is a fine prediction
                got = torch.as_tensor(got, dtype=want.dtype)
            except (TypeError, ValueError, RuntimeError):
                pass
        difference = describe_difference(
            want,
            got,
            exact=exact,
            rtol=rtol,
            atol=atol,
            words=(N_("the ranks hold"), N_("you said")),
        )
        if difference:
            wrong[rank] = difference
    if wrong:
        return report(False, per_rank_message(name, wrong, len(actual)))
    return report(
        True,
        f"{PASS} " + _("{name}: right on all {count} ranks.").format(name=name, count=len(actual)),
    )
