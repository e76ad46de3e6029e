"""Train next to the single-process baseline, step by step, and find the first step that differs.

On every rank, :func:`compare_steps` trains two models in lock step: the strategy's
(this rank's share of each global batch, with communication) and the **baseline**:
one model, rank 0's initial weights, the *whole* global batch, no communication -
exactly what a single process would do. After each step it compares, on the rank:

* the gradients after ``finish()`` (strategies that keep every gradient; not ZeRO-1,
  whose rank holds the mean of its shard only);
* the weights after ``step()``, every parameter;

and it records the loss and the size of AdamW's two moments (``Σ m²``, ``Σ v``).
:func:`first_divergence` then puts the ranks together (the kernel's side): the
global batch's loss per step (the mean of the ranks' losses), the moments (summed
over the ranks when the optimizer state is sharded), and the first step at which
anything differs, with by how much.

**The tolerance.** Float addition is not associative: the ranks sum the gradient
in another order than one process does, so the two agree to rounding, not bit for
bit. Tensors match when ``|got - want| <= atol + rtol * |want|`` element by element
(``torch.allclose``) with :data:`TOLERANCE`'s values, losses when
``|got - want| <= LOSS_RTOL * |want|``, the moments' sums when within ``MOMENT_RTOL``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from labsupport.backend import rank_device
from labsupport.capstone.model import Config, global_batch, loss_fn, make_model, make_optimizer
from labsupport.capstone.run import _batch, setup

#: (rtol, atol) per kind of tensor: weights move by at most lr = 3e-3 per step.
TOLERANCE = {"gradients": (1e-3, 1e-6), "weights": (1e-4, 1e-5), "initial weights": (0.0, 0.0)}
LOSS_RTOL = 1e-5  # the loss of a global batch
MOMENT_RTOL = 1e-3  # Σ m² and Σ v of AdamW's moments


def _differ(
    what: str, step: int, names: Sequence[str], got: Iterable[Any], want: Iterable[torch.Tensor]
) -> dict[str, Any] | None:
    """None if every tensor matches; else which parameters differ, and by how much."""
    wrong, worst, worst_abs, got_sq, want_sq = [], "", 0.0, 0.0, 0.0
    for name, g, w in zip(names, got, want, strict=True):
        if g is None:
            return {
                "step": step,
                "what": what,
                "names": [name],
                "missing": True,
                "total": len(names),
                "max_abs": float("inf"),
                "worst": name,
                "ratio": 0.0,
            }
        g, w = g.detach().float(), w.detach().float()
        rtol, atol = TOLERANCE[what]
        if torch.allclose(g, w, rtol=rtol, atol=atol):
            continue
        wrong.append(name)
        diff = (g - w).abs().max().item()
        if diff > worst_abs:
            worst, worst_abs = name, diff
        got_sq += g.pow(2).sum().item()
        want_sq += w.pow(2).sum().item()
    if not wrong:
        return None
    ratio = (got_sq / want_sq) ** 0.5 if want_sq else float("inf")
    return {
        "step": step,
        "what": what,
        "names": wrong,
        "missing": False,
        "total": len(names),
        "max_abs": worst_abs,
        "worst": worst,
        "ratio": ratio,
    }


def _moments(optimizers: Iterable[torch.optim.Optimizer]) -> tuple[float, float, int]:
    """(Σ m², Σ v, elements) over AdamW's ``exp_avg`` and ``exp_avg_sq`` in these optimizers."""
    m2 = v = 0.0
    n = 0
    for opt in optimizers:
        for state in opt.state.values():
            if "exp_avg" in state:
                m2 += state["exp_avg"].double().pow(2).sum().item()
                v += state["exp_avg_sq"].double().sum().item()
                n += state["exp_avg"].numel()
    return m2, v, n


def compare_steps(
    strategy: Any,
    steps: int = 4,
    cfg: Config | None = None,
    bucket_bytes: int = 1 << 20,
    sharded: bool = False,
) -> dict[str, Any]:
    """On every rank: train ``strategy`` and the baseline in lock step; this rank's findings.

    Returns the first difference this rank saw (None if none), and per step: this rank's
    loss, the baseline's loss, the moments of this rank's optimizers and of the baseline's.
    Training goes on after a difference, so that every rank makes the same collectives.
    """
    cfg = cfg or Config()
    device = rank_device()
    base = make_model(cfg).to(device)  # rank 0's initial weights (seed cfg.seed + 0)
    base_opt = make_optimizer(base.parameters(), cfg)
    model, inner, s, optimizers = setup(strategy, cfg, bucket_bytes)
    names = [n for n, _ in inner.named_parameters()]
    found = _differ("initial weights", -1, names, inner.parameters(), base.parameters())
    out: dict[str, list] = {"losses": [], "base_losses": [], "moments": [], "base_moments": []}
    for step in range(steps):
        x, y = (t.to(device) for t in global_batch(step, cfg))
        base_opt.zero_grad(set_to_none=True)
        base_loss = loss_fn(base(x), y)
        base_loss.backward()
        for p in inner.parameters():
            p.grad = None
        lx, ly = _batch(step, cfg)
        loss = loss_fn(model(lx), ly)
        loss.backward()
        s.finish()
        if found is None and not sharded:
            got = [p.grad for p in inner.parameters()]
            found = _differ("gradients", step, names, got, [p.grad for p in base.parameters()])
        base_opt.step()
        s.step()
        if found is None:
            found = _differ("weights", step, names, inner.parameters(), base.parameters())
        out["losses"].append(loss.item())
        out["base_losses"].append(base_loss.item())
        out["moments"].append(_moments(optimizers))
        out["base_moments"].append(_moments([base_opt]))
    return {"rank": dist.get_rank(), "first": found, "names": names, **out}


_ORDER = {"loss": 0, "initial weights": -1, "gradients": 1, "optimizer moments": 2, "weights": 3}


def first_divergence(results: Sequence[dict[str, Any]], sharded: bool = False) -> dict | None:
    """The kernel's side: the earliest difference over all ranks, losses and moments included.

    ``results``: :func:`compare_steps`'s, one per rank. Adds, per step, the loss of the
    global batch (the mean of the ranks' losses) against the baseline's, and the moments
    (each rank's, or their sum over the ranks when ``sharded``) against the baseline's.
    """
    found = [dict(r["first"], rank=r["rank"]) for r in results if r["first"] is not None]
    steps = len(results[0]["losses"])
    world = len(results)
    for step in range(steps):
        got = sum(r["losses"][step] for r in results) / world
        want = results[0]["base_losses"][step]
        if abs(got - want) > LOSS_RTOL * abs(want):
            found.append(
                {
                    "step": step,
                    "what": "loss",
                    "got": got,
                    "want": want,
                    "rank": None,
                    "max_abs": abs(got - want),
                }
            )
            break
    for step in range(steps):
        want_m2, want_v, want_n = results[0]["base_moments"][step]
        per_rank = [r["moments"][step] for r in results]
        groups = [tuple(map(sum, zip(*per_rank, strict=True)))] if sharded else per_rank
        for rank, (m2, v, n) in enumerate(groups):
            close = (
                abs(m2 - want_m2) <= MOMENT_RTOL * want_m2
                and abs(v - want_v) <= MOMENT_RTOL * want_v
            )
            if not close or (sharded and n < want_n):
                ratio = (m2 / want_m2) ** 0.5 if want_m2 else float("inf")
                found.append(
                    {
                        "step": step,
                        "what": "optimizer moments",
                        "ratio": ratio,
                        "elements": n,
                        "want_elements": want_n,
                        "rank": None if sharded else rank,
                    }
                )
                break
        else:
            continue
        break
    if not found:
        return None
    return min(found, key=lambda f: (f["step"], _ORDER[f["what"]], f["rank"] or 0))
