"""Train next to the single-process baseline, step by step, and find the first thing that differs.

On every rank, :func:`compare_steps` trains two models in lock step: the data-parallel
one (this rank's share of each global batch, its own initial seed, the version's
communication) and the **baseline**: rank 0's initial weights, the *whole* global
batch, no communication, exactly what one process would do. It compares, element by
element, on the rank:

* the initial parameters and buffers, once the version is built;
* the gradients when ``backward()`` returns (DDP wrappers; not ZeRO-1, whose ranks
  hold their local gradients until ``step()``);
* what the optimizer holds after ``step()``, for each tensor it steps, in the model's
  own numbering (:func:`optimizer_view`): the gradient it used (ZeRO-1: the mean of
  this rank's shard) and its state (AdamW's two moments), against the baseline's
  slice of the same elements;
* the parameters after ``step()``.

:func:`first_divergence` puts the ranks together (the kernel's side): the global
batch's loss per step, which elements each rank's optimizer owns (every trainable
element exactly once, for ZeRO-1), and the first step at which anything differs.

**The tolerance.** Float addition is not associative: the ranks sum the gradient in
another order than one process does, so the two agree to rounding, not bit for bit.
In float64 that is about 1e-13 after 20 AdamW steps, so the graders compare in
float64 with tight tolerances (:data:`TOLERANCE`) and torch's default ``eps``; in
float32 AdamW's ``g/(√v + eps)`` turns rounding in near-zero gradients into changes
of up to the learning rate, and only a loose tolerance would pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labsupport.runtime import trace
from labsupport.runtime.backend import rank_device
from labsupport.runtime.experiments.ddp_runs import is_sharded_optimizer, setup, version_factory
from labsupport.runtime.experiments.workload import Workload

#: dtype -> (rtol, atol) for tensors; LOSS_RTOL for a global batch's loss.
TOLERANCE = {torch.float64: (1e-9, 1e-12), torch.float32: (1e-3, 1e-5)}
LOSS_RTOL = {torch.float64: 1e-11, torch.float32: 1e-5}

Segment = tuple[int, int, int]  # (parameter index, first element, end element)


def optimizer_view(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor]
) -> list[tuple[Segment, torch.Tensor | None, dict[str, Any]]]:
    """Each tensor the optimizer steps, cut per parameter: (segment, gradient, state) slices.

    A plain optimizer steps the parameters themselves. A sharded one (``optimizer.optim``
    and ``optimizer.flat``, as :class:`labsupport.ddp.ZeRO1Base` has) steps slices of the
    flat buffer of which every parameter is a view; a slice that is not one is a
    ValueError that says so.
    """
    inner, flat = getattr(optimizer, "optim", None), getattr(optimizer, "flat", None)
    if inner is None or flat is None:
        index = {id(p): i for i, p in enumerate(params)}
        return [
            ((index[id(t)], 0, t.numel()), _flat(t.grad, t), _flat_state(optimizer, t))
            for g in optimizer.param_groups
            for t in g["params"]
        ]
    ptr, base = flat.untyped_storage().data_ptr(), flat.storage_offset()
    spans = []
    for i, p in enumerate(params):
        if p.untyped_storage().data_ptr() != ptr:
            raise ValueError(
                f"parameter {i} is not a view of self.flat: the all-gather into "
                "self.flat would not update it"
            )
        spans.append((p.storage_offset() - base, i, p.numel()))
    out = []
    for g in inner.param_groups:
        for t in g["params"]:
            if t.untyped_storage().data_ptr() != ptr or not t.is_contiguous():
                raise ValueError("a tensor the shard's optimizer steps is not a slice of self.flat")
            a = t.storage_offset() - base
            b = a + t.numel()
            for start, i, n in spans:
                lo, hi = max(a, start), min(b, start + n)
                if lo < hi:
                    cut = slice(lo - a, hi - a)
                    grad = None if t.grad is None else t.grad.reshape(-1)[cut]
                    state = {
                        k: v[cut] if torch.is_tensor(v) and v.dim() else v
                        for k, v in _flat_state(inner, t).items()
                    }
                    out.append(((i, lo - start, hi - start), grad, state))
    return out


def _flat(value: Any, like: torch.Tensor) -> Any:
    """A tensor of ``like``'s size as 1-D; anything else as it is."""
    if torch.is_tensor(value) and value.numel() == like.numel() and value.dim():
        return value.reshape(-1)
    return value


def _flat_state(optimizer: torch.optim.Optimizer, t: torch.Tensor) -> dict[str, Any]:
    return {k: _flat(v, t) for k, v in optimizer.state.get(t, {}).items()}


def _differ(
    what: str,
    step: int,
    names: Sequence[str],
    got: Iterable[Any],
    want: Iterable[Any],
    tol: tuple[float, float],
) -> dict[str, Any] | None:
    """None if every pair matches; else which tensors differ and by how much."""
    wrong, worst, worst_abs, got_sq, want_sq = [], "", 0.0, 0.0, 0.0
    for name, g, w in zip(names, got, want, strict=True):
        if (g is None) != (w is None):
            return {
                "step": step,
                "what": what,
                "names": [name],
                "missing": g is None,
                "total": len(names),
                "max_abs": float("inf"),
                "worst": name,
                "ratio": 0.0,
            }
        if g is None:
            continue
        g, w = (
            torch.as_tensor(g).detach().double().cpu(),
            torch.as_tensor(w).detach().double().cpu(),
        )
        if g.shape == w.shape and torch.allclose(g, w, rtol=tol[0], atol=tol[1]):
            continue
        wrong.append(name)
        diff = (g - w).abs().max().item() if g.shape == w.shape else float("inf")
        if diff > worst_abs or not worst:
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


def _label(names: Sequence[str], seg: Segment, whole: int) -> str:
    i, a, b = seg
    return names[i] if (a, b) == (0, whole) else f"{names[i]}[{a}:{b}]"


def compare_steps(
    parallel: Any,
    cfg: Workload,
    steps: int = 3,
    *,
    bucket_cap_mb: float | None = None,
    accumulate: int = 1,
    calls: list[list[trace.Call]] | None = None,
) -> dict[str, Any]:
    """On every rank: train ``parallel`` and the baseline in lock step; this rank's findings.

    ``accumulate`` > 1 splits each rank's batch into that many micro-batches, each
    loss scaled by ``1/accumulate``, all but the last under the wrapper's ``no_sync()``
    (a ZeRO-1 optimizer needs none). ``calls``: if given, each step's collectives
    (:func:`labsupport.runtime.trace.collectives`) are appended to it, one list per step.
    Returns the first difference this rank saw (None if none), the losses, and the
    segments its optimizer steps, and ``gaps``: the largest difference of any weight
    after each step. Training goes on after a difference, so that every rank makes the
    same collectives.
    """
    device = rank_device()
    sharded = is_sharded_optimizer(version_factory(parallel, bucket_cap_mb))
    base = cfg.make_model().to(device)  # rank 0's initial weights
    base_opt = cfg.make_optimizer(base)
    model, inner, opt = setup(parallel, cfg, bucket_cap_mb=bucket_cap_mb, device=device)
    names = [n for n, _ in inner.named_parameters()]
    params, base_params = list(inner.parameters()), list(base.parameters())
    tol = TOLERANCE.get(cfg.dtype, TOLERANCE[torch.float32])
    states = [*names, *(n for n, _ in inner.named_buffers())]
    found = _differ(
        "initial weights",
        -1,
        states,
        [*params, *inner.buffers()],
        [*base_params, *base.buffers()],
        (0.0, 0.0),
    )
    losses, base_losses, gaps = [], [], []
    rank, world = dist.get_rank(), dist.get_world_size()
    for step in range(steps):
        x, y = (t.to(device) for t in cfg.global_batch(step))
        base_opt.zero_grad(set_to_none=True)
        base_loss = cfg.loss(base(x), y)
        base_loss.backward()
        opt.zero_grad(set_to_none=True)
        lx, ly = (t.to(device) for t in cfg.local_batch(step, rank, world))
        if len(lx) % accumulate:
            raise ValueError(
                f"each rank's batch of {len(lx)} does not split into {accumulate} equal "
                f"micro-batches: use a global batch that is a multiple of {world * accumulate}"
            )
        loss = 0.0
        with trace.collectives() as step_calls:
            for k, (mx, my) in enumerate(
                zip(lx.chunk(accumulate), ly.chunk(accumulate), strict=True)
            ):
                last = k == accumulate - 1
                quiet = model.no_sync() if not last and hasattr(model, "no_sync") else _nothing()
                with quiet:
                    micro = cfg.loss(model(mx), my) / accumulate
                    micro.backward()
                loss += micro.item()
            if found is None and not sharded:
                found = _differ(
                    "gradients",
                    step,
                    names,
                    [p.grad for p in params],
                    [p.grad for p in base_params],
                    tol,
                )
            base_opt.step()
            opt.step()
        if calls is not None:
            calls.append(step_calls)
        if found is None:
            found = _compare_optimizer(step, names, params, opt, base_params, base_opt, tol)
        if found is None:
            found = _differ("weights", step, names, params, base_params, tol)
        gaps.append(
            max((p - q).abs().max().item() for p, q in zip(params, base_params, strict=True))
        )
        losses.append(loss)
        base_losses.append(base_loss.item())
    owned = [seg for seg, _, _ in optimizer_view(opt, params)] if sharded else None
    trainable = [i for i, p in enumerate(params) if p.requires_grad]
    return {
        "rank": rank,
        "first": found,
        "names": names,
        "losses": losses,
        "gaps": gaps,
        "base_losses": base_losses,
        "owned": owned,
        "sharded": sharded,
        "sizes": [p.numel() for p in params],
        "trainable": trainable,
        "dtype": str(cfg.dtype),
    }


class _nothing:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


def _compare_optimizer(
    step: int,
    names: Sequence[str],
    params: Sequence[nn.Parameter],
    opt: Any,
    base_params: Sequence[nn.Parameter],
    base_opt: torch.optim.Optimizer,
    tol: tuple,
) -> dict[str, Any] | None:
    """The optimizer's gradients and state, segment by segment, against the baseline's."""
    view = optimizer_view(opt, params)
    labels = [_label(names, seg, params[seg[0]].numel()) for seg, _, _ in view]
    want_grads, got_grads, got_state, want_state, state_labels = [], [], [], [], []
    for (seg, grad, state), label in zip(view, labels, strict=True):
        i, a, b = seg
        bp = base_params[i]
        got_grads.append(grad)
        want_grads.append(None if bp.grad is None else bp.grad.reshape(-1)[a:b])
        for key, value in _flat_state(base_opt, bp).items():
            want = value[a:b] if torch.is_tensor(value) and value.dim() else value
            got_state.append(state.get(key))
            want_state.append(want)
            state_labels.append(f"{label} {key}")
    return _differ("optimizer's gradients", step, labels, got_grads, want_grads, tol) or _differ(
        "optimizer state", step, state_labels, got_state, want_state, tol
    )


_ORDER = {
    "initial weights": -1,
    "loss": 0,
    "gradients": 1,
    "optimizer's gradients": 2,
    "optimizer state": 3,
    "weights": 4,
    "shards": 5,
}


def first_divergence(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The kernel's side: the earliest difference over all ranks, losses and shards included."""
    found = [dict(r["first"], rank=r["rank"]) for r in results if r["first"] is not None]
    world = len(results)
    dtype = getattr(torch, results[0]["dtype"].replace("torch.", ""))
    rtol = LOSS_RTOL.get(dtype, LOSS_RTOL[torch.float32])
    for step in range(len(results[0]["losses"])):
        got = sum(r["losses"][step] for r in results) / world
        want = results[0]["base_losses"][step]
        if abs(got - want) > rtol * abs(want):
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
    if results[0]["sharded"]:
        problem = _coverage(results)
        if problem:
            found.append({"step": 0, "what": "shards", "rank": None, "problem": problem})
    if not found:
        return None
    return min(found, key=lambda f: (f["step"], _ORDER[f["what"]], f["rank"] or 0))


def _coverage(results: Sequence[dict[str, Any]]) -> str | None:
    """What is wrong with the ranks' shards: every trainable element owned exactly once."""
    names, sizes = results[0]["names"], results[0]["sizes"]
    count = [torch.zeros(n, dtype=torch.int32) for n in sizes]
    for r in results:
        for i, a, b in r["owned"]:
            count[i][a:b] += 1
    for i in results[0]["trainable"]:
        if (count[i] == 0).any():
            return f"no rank's optimizer steps {int((count[i] == 0).sum())} elements of {names[i]}"
        if (count[i] > 1).any():
            return f"{int((count[i] > 1).sum())} elements of {names[i]} are in two ranks' shards"
    per_rank = [sum(b - a for _, a, b in r["owned"]) for r in results]
    share = -(-sum(sizes) // len(results))  # ceil(all elements / p): a flat shard's size
    if max(per_rank) > share:
        return (
            f"the ranks' optimizers step {per_rank} elements; each should step at most "
            f"{share}, 1/{len(results)} of the {sum(sizes)}: shard the optimizer "
            "state"
        )
    return None
