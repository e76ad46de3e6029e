"""Graders for notebook 08: scaling efficiency from tables, and top-k with error feedback.

* :func:`check_efficiencies` - your ``efficiencies(cards, throughput)`` on the notebook's
  table and on one that does not start at one card.
* :func:`check_batch_table` - your ``batch_table(batches, first_share)``: the
  communication share and the efficiency at each batch per rank, without overlap, from
  the first row's share.
* :func:`check_topk_error_feedback` - your ``topk_ef(grad, residual, k)`` on every rank:
  the average it returns and the residual it keeps, for two steps in a row, against
  :func:`labsupport.compress.topk_error_feedback`; then a short training run with it as
  a DDP hook (top-k of 10 %), whose loss must end within a tolerance of uncompressed
  training's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from labsupport.runtime.check import (
    FAIL,
    PASS,
    CheckResult,
    check_function,
    cluster_for_check,
    describe_difference,
    explain_failure,
    report,
)
from labsupport.runtime.language import _

#: The tables the efficiency grader tries: (cards, throughput in samples/s).
TABLES = (
    ([1, 8, 16, 32], [9.0, 64.0, 110.0, 120.0]),
    ([2, 4, 8], [30.0, 54.0, 84.0]),
)
#: Convergence run: steps, top-k ratio, tolerance on the final loss relative to the baseline.
STEPS, RATIO, TOLERANCE, LAST = 60, 0.1, 0.25, 10


def reference_efficiencies(cards: Sequence[int], throughput: Sequence[float]) -> list[float]:
    """Each row's efficiency relative to the first: ``X / ((cards / cards_0) · X_0)``."""
    c0, x0 = cards[0], throughput[0]
    return [x / (c / c0 * x0) for c, x in zip(cards, throughput, strict=True)]


#: Batch tables the batch grader tries: (batches per rank, communication share of the first).
BATCH_TABLES = (([16, 32, 64, 128], 0.25), ([8, 64, 512], 0.6), ([100, 50], 0.1))


def reference_batch_table(batches: Sequence[int], first_share: float) -> list[tuple[float, float]]:
    """(communication share, efficiency) at each batch per rank, without overlap.

    The all-reduce takes the same time ``C`` whatever the batch; compute is ``k·b``. The
    first row's share ``s0 = C / (C + k·b0)`` gives ``C/k = b0·s0 / (1 − s0)``, so at
    batch ``b`` the share is ``(C/k) / (C/k + b)``. A step on one rank is the compute
    alone, on ``p`` ranks compute plus the all-reduce: the weak-scaling efficiency
    ``compute / (compute + C)`` is ``1 − share``.
    """
    c_over_k = batches[0] * first_share / (1 - first_share)
    shares = [c_over_k / (c_over_k + b) for b in batches]
    return [(s, 1 - s) for s in shares]


def check_batch_table(fn: Callable[[list[int], float], list[tuple[float, float]]]) -> CheckResult:
    """Grade ``fn(batches, first_share)`` -> [(share, efficiency), ...] as fractions."""
    cases = [(list(b), s) for b, s in BATCH_TABLES]
    return check_function(
        fn, reference_batch_table, cases, name="batch_table", rtol=1e-3, atol=1e-4
    )


def check_efficiencies(fn: Callable[[list[int], list[float]], list[float]]) -> CheckResult:
    """Grade ``fn(cards, throughput)`` -> efficiencies as fractions (0.5 for 50 %)."""
    return check_function(
        fn,
        reference_efficiencies,
        [tuple(map(list, t)) for t in TABLES],
        name="efficiencies",
        rtol=1e-3,
        atol=1e-4,
    )


def _sum_trial(fn: Callable, numel: int, k: int) -> list[tuple[Any, Any]]:
    """On one rank: two steps of the reference, then of ``fn``, from the same inputs."""
    import torch
    import torch.distributed as dist

    from labsupport.compress import topk_error_feedback

    g = torch.Generator().manual_seed(100 + dist.get_rank())
    grads = [torch.randn(numel, generator=g) for _ in range(2)]
    residual0 = torch.randn(numel, generator=g) / 4
    out = []
    for impl in (topk_error_feedback, fn):
        residual, steps = residual0.clone(), []
        for grad in grads:
            average, residual = impl(grad.clone(), residual.clone(), k)
            steps.append((average, residual))
        out.append(steps)
        dist.barrier()
    return list(zip(out[0], out[1], strict=True))


def _converge(fn: Callable) -> dict[str, float]:
    """On every rank: final loss (mean of the last steps) without compression and with ``fn``."""
    from labsupport import netem
    from labsupport.runtime import emulator
    from labsupport.runtime.experiments import compression_runs
    from labsupport.runtime.experiments.workload import Config

    cfg = Config(in_features=32, hidden=64, layers=3, out_features=8, batch=32)
    previous = emulator.current_network()
    if previous is not None:  # convergence does not depend on the network: make it quick
        emulator.set_network(netem.Network(inter=netem.Link(20e-6, 5e9), ranks_per_node=1))
    try:
        runs = {
            name: compression_runs.train(name, STEPS, cfg, ratio=RATIO, topk_function=fn)["loss"]
            for name in ("none", "topk")
        }
    finally:
        if previous is not None:
            emulator.set_network(previous)
    return {name: sum(loss[-LAST:]) / LAST for name, loss in runs.items()}


def _call(cluster: Any, job: Callable, args: tuple, name: str, timeout: float):
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster) as running:
            return running.call(job, args, timeout=timeout), None
    except (RankError, CollectiveTimeout) as err:
        hint = {"timeout": _("Does every rank call the same all-gathers in the same order?")}
        return None, explain_failure(err, name, timeout, hints=hint)


def check_topk_error_feedback(
    fn: Callable, cluster: Any = None, timeout: float = 120.0
) -> CheckResult:
    """Grade ``fn(grad, residual, k) -> (average over the ranks, new residual)`` on every rank."""
    name = "topk_ef"
    numel, k = 40, 4
    results, failed = _call(cluster, _sum_trial, (fn, numel, k), name, timeout)
    if failed is not None:
        return failed
    for rank, steps in enumerate(results):
        for step, (expected, got) in enumerate(steps):
            if not isinstance(got, tuple | list) or len(got) != 2:
                return report(
                    False,
                    f"{FAIL} "
                    + _(
                        "{name} must return (average, new residual); rank {rank} returned {type}."
                    ).format(name=name, rank=rank, type=type(got).__name__),
                )
            for what, want, have in zip(("average", "residual"), expected, got, strict=True):
                diff = describe_difference(want, have, rtol=1e-5, atol=1e-6)
                if diff:
                    wrong, hint = {
                        "average": (
                            _("{name}, rank {rank}, step {step}: the average is wrong: {diff}."),
                            _(
                                "Is the top-k taken of grad + residual, did every rank "
                                "all-gather its (index, value) pairs and add each value at its "
                                "own index, then divide by the world size? All-reducing the "
                                "values adds entries of different coordinates."
                            ),
                        ),
                        "residual": (
                            _("{name}, rank {rank}, step {step}: the residual is wrong: {diff}."),
                            _(
                                "The residual is grad + residual minus what was sent: "
                                "the corrected gradient with the k sent entries set to zero."
                            ),
                        ),
                    }[what]
                    return report(
                        False,
                        f"{FAIL} "
                        + wrong.format(name=name, rank=rank, step=step + 1, diff=diff)
                        + "\n  "
                        + hint,
                    )
    losses, failed = _call(cluster, _converge, (copy.deepcopy(fn),), name, timeout)
    if failed is not None:
        return failed
    base, mine = losses[0]["none"], losses[0]["topk"]
    if not mine <= base * (1 + TOLERANCE):
        return report(
            False,
            f"{FAIL} "
            + _(
                "{name}: right sums, but training with it ends at loss "
                "{mine:.4f}, more than {tolerance:.0%} above uncompressed training's "
                "{base:.4f} ({steps} steps, top-k of {ratio:.0%})."
            ).format(
                name=name, mine=mine, tolerance=TOLERANCE, base=base, steps=STEPS, ratio=RATIO
            ),
        )
    return report(
        True,
        f"{PASS} "
        + _(
            "{name}: the average and the residual match the reference on "
            "all {world} ranks for two steps, and training with top-k of "
            "{ratio:.0%} ends at loss {mine:.4f} (uncompressed {base:.4f}, "
            "tolerance {tolerance:.0%})."
        ).format(
            name=name, world=len(results), ratio=RATIO, mine=mine, base=base, tolerance=TOLERANCE
        ),
    )
