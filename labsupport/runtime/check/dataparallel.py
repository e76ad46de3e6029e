"""What the data-parallel graders (notebooks 07 and 10) run on the ranks, and the model they run.

**The grading model** (:class:`GradingNet`) is small and awkward on purpose, with what
real models have and a DDP must handle: a weight used twice (the embedding is also the
output projection), a frozen layer, a buffer, parameters registered in another order
than they are used (so gradients arrive out of bucket order), and, for one case, a
parameter forward never uses. Each rank builds it from a seed of its own. It trains
in float64 with torch's default AdamW and two parameter groups (weight decay for the
matrices only): in float64 a data-parallel run and one process agree to about 1e-13,
so the comparison can be tight (:data:`labsupport.runtime.capstone.TOLERANCE`) and needs no
special ``eps``.

**The cases**, each next to one process on the whole batch, element by element, step
by step (:func:`labsupport.runtime.capstone.compare_steps`), with every collective recorded
(:func:`labsupport.runtime.trace.collectives`):

* a DDP wrapper (:func:`ddp_cases`): several bucket caps, among them one smaller than
  every tensor; gradient accumulation under ``no_sync()``; the unused parameter, which
  must raise an error naming it, and with ``find_unused_parameters=True`` must train;
  optionally a second workload (the capstone's transformer);
* a ZeRO-1 optimizer (:func:`zero_cases`): the transformer in float64 with parameter
  groups, the grading model with its frozen layer, gradient accumulation, and under a
  DDP wrapper.

The judging is in :mod:`labsupport.runtime.check.ddp_judge`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from labsupport import ddp
from labsupport.ddp.buckets import trainable
from labsupport.runtime import capstone
from labsupport.runtime.check.overlap_timing import (
    LAYER_COMPUTE,
    NETWORK,
    TIMED_STEPS,
    LayerCompute,
)
from labsupport.runtime.experiments import workload

#: Steps per case.
STEPS = 3


class GradingNet(nn.Module):
    """Tied embedding, a frozen layer, a buffer, registration order unlike use order."""

    def __init__(
        self, vocab: int, width: int, unused: bool, buffer: bool, compute: float = 0.0
    ) -> None:
        super().__init__()
        self.compute = compute  # emulated seconds of each layer's backward (the timed runs)
        self.head_bias = nn.Parameter(0.1 * torch.randn(vocab))  # registered first, used last
        self.embed = nn.Embedding(vocab, width)  # also the output projection (tied)
        self.mix = nn.Linear(width, 2 * width)
        self.frozen = nn.Linear(2 * width, width).requires_grad_(False)
        self.out = nn.Linear(width, width)
        scale = torch.rand(width) + 0.5 if buffer else torch.ones(width)
        self.register_buffer("scale", scale)
        self.spare = nn.Linear(width, width) if unused else None  # never used in forward

    def _layer(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``x``, whose backward spends the layer's emulated compute (if any) first."""
        return LayerCompute.apply(x, self.compute, name) if self.compute else x

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # noqa: D102
        x = self._layer(self.embed(idx) * self.scale, "embed")
        x = self._layer(self.mix(x), "mix")
        x = self._layer(self.frozen(torch.tanh(x)), "frozen")
        x = self._layer(self.out(torch.tanh(x)), "out")
        return self._layer(x @ self.embed.weight.T + self.head_bias, "head")


@dataclass(frozen=True)
class GradingTask(workload.Workload):
    """The grading model's workload: random tokens, cross-entropy, AdamW in two groups."""

    vocab: int = 11
    width: int = 6
    seq_len: int = 5
    batch: int = 16  # 1, 2, 4 and 8 ranks, each with two micro-batches (accumulation)
    unused: bool = False
    buffer: bool = True
    lr: float = 1e-2
    seed: int = 0
    dtype: torch.dtype = torch.float64
    compute: float = 0.0  # emulated seconds per layer in backward (the timed runs only)
    optimizer_class = torch.optim.AdamW

    def make_model(self, seed: int | None = None) -> GradingNet:  # noqa: D102
        torch.manual_seed(self.seed if seed is None else seed)
        net = GradingNet(self.vocab, self.width, self.unused, self.buffer, self.compute)
        return net.to(self.dtype)

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: D102
        g = torch.Generator().manual_seed(500 + step)
        idx = torch.randint(self.vocab, (self.batch, self.seq_len), generator=g)
        return idx, torch.randint(self.vocab, (self.batch, self.seq_len), generator=g)

    def loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:  # noqa: D102
        params = list(model.parameters())  # the frozen layer too, as model.parameters() gives
        return [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]

    def optimizer_defaults(self) -> dict[str, Any]:  # noqa: D102
        return {"lr": self.lr}


GRADE = GradingTask()
#: The grading model of the timed runs: 2 ms of emulated compute in each layer's backward.
TIMED = GradingTask(compute=LAYER_COMPUTE)
#: The capstone's transformer, small, in float64: notebook 10's graders train it too.
GPT_GRADE = capstone.GPTConfig(
    vocab=32, seq_len=16, d_model=32, heads=4, layers=2, batch=16, dtype=torch.float64
)


def _run(make: Callable, cfg: Any, steps: int, **kwargs: Any) -> dict[str, Any]:
    """``compare_steps`` with each step's collectives, as plain tuples (see ``trace.Call``).

    Plain data only (no classes of ours), so that the folder grader can read the ranks'
    values with ``torch.load(weights_only=True)``.
    """
    calls: list = []
    out = capstone.compare_steps(make, cfg, steps, calls=calls, **kwargs)
    out["calls"] = [[dataclasses.astuple(c) for c in step] for step in calls]
    return out


def ddp_cases(
    make: Callable, caps: list[float | None] | None, extra: tuple[Any, float] | None = None
) -> dict[str, Any]:
    """On every rank: the cases for a DDP wrapper class (``caps=None``: it takes no cap).

    ``extra``: (a workload, a bucket cap) to train too, e.g. the capstone's transformer.
    """
    with_cap = [(cap, functools.partial(make, bucket_cap_mb=cap)) for cap in caps or []]
    runs = with_cap or [(None, make)]
    out: dict[str, Any] = {"caps": [(cap, _run(m, GRADE, STEPS)) for cap, m in runs]}
    first = runs[0][1]
    out["accumulate"] = _run(first, GRADE, 2, accumulate=2)
    unused = dataclasses.replace(GRADE, unused=True)
    try:
        capstone.compare_steps(first, unused, 1)
        out["unused_error"] = None
    except NotImplementedError:
        raise
    except RuntimeError as err:
        out["unused_error"] = str(err)
    out["find_unused"] = _run(functools.partial(first, find_unused_parameters=True), unused, 2)
    if extra is not None:
        cfg, cap = extra
        made = functools.partial(make, bucket_cap_mb=cap) if caps else make
        out["extra"] = _run(made, cfg, STEPS)
    return out


def zero_cases(make: Callable) -> dict[str, Any]:
    """On every rank: the cases for a ZeRO-1 optimizer class."""
    under_ddp = (functools.partial(ddp.Bucketed, bucket_cap_mb=0.01), make)
    no_buffer = dataclasses.replace(GRADE, buffer=False)  # ZeRO-1 syncs parameters, not buffers
    return {
        "transformer": _run(make, GPT_GRADE, STEPS),
        "frozen": _run(make, no_buffer, STEPS),
        "accumulate": _run(make, GPT_GRADE, 2, accumulate=2),
        "under ddp": _run(under_ddp, GPT_GRADE, 2),
    }


def expected_buckets(cap: float | None, cfg: Any = GRADE) -> list[int]:
    """Elements per bucket, in the order they must be sent, for the grading model."""
    params = trainable(cfg.make_model())
    return [sum(p.numel() for p in b) for b in ddp.param_buckets(params, cap)]


def expected_bucket_names(cap: float | None, cfg: Any = GRADE) -> list[list[str]]:
    """The parameters' names of each bucket, in the order they must be sent."""
    model = cfg.make_model()
    names = {id(p): n for n, p in model.named_parameters()}
    return [[names[id(p)] for p in b] for b in ddp.param_buckets(trainable(model), cap)]


# ------------------------------------------------------------------ the timed runs
def timed_run(make: Callable) -> list[dict[str, Any]]:
    """On every rank: train ``make(model)`` on :data:`TIMED`; each step's record of times.

    A step's record (plain data): ``ready`` and ``returned``, (parameter, emulated time)
    from the grader's hooks before and after the wrapper's; ``layers``, (layer, time its
    backward began); ``ops``, (name, bytes, issued, end, in backward) of every operation
    the process group executed during backward; ``backward``, (start, end).
    """
    import torch.distributed as dist

    from labsupport.runtime import emulator
    from labsupport.runtime.emulator import clock

    model = TIMED.make_model(seed=1 + dist.get_rank())
    names = {id(p): n for n, p in model.named_parameters()}
    params = trainable(model)
    notes: dict[str, list] = {"ready": [], "returned": []}

    def note(kind: str) -> Callable:
        return lambda p: notes[kind].append((names[id(p)], clock.now()))

    for p in params:
        p.register_post_accumulate_grad_hook(note("ready"))
    wrapped = make(model)
    for p in params:  # registered after the wrapper's: runs once its hook has returned
        p.register_post_accumulate_grad_hook(note("returned"))
    opt = TIMED.make_optimizer(model)
    steps = []
    for step in range(TIMED_STEPS):
        x, y = TIMED.local_batch(step, dist.get_rank(), dist.get_world_size())
        opt.zero_grad(set_to_none=True)
        loss = TIMED.loss(wrapped(x), y)
        notes.update(ready=[], returned=[])
        LayerCompute.marks = marks = []
        try:
            # Hidden: the CPU time of backward and the hooks is not charged, so the clock
            # moves only by the layers' emulated compute and by waits: the same everywhere.
            with emulator.operations() as ops, clock.hidden():
                start = clock.now()
                loss.backward()
                end = clock.now()
        finally:
            LayerCompute.marks = None
        opt.step()
        steps.append(
            {
                "ready": list(notes["ready"]),
                "returned": list(notes["returned"]),
                "layers": marks,
                "ops": [(o.name, o.nbytes, o.issued, o.end, o.in_backward) for o in ops],
                "backward": (start, end),
                "itemsize": params[0].element_size(),
            }
        )
    return steps


def timed_cases(make: Callable, caps: list[float | None] | None) -> list | None:
    """On every rank: :func:`timed_run` for each cap on the grader's network; None if this
    cluster does not emulate a network (the grader then starts one that does)."""
    import torch.distributed as dist

    from labsupport.runtime import emulator
    from labsupport.runtime.emulator.state import STATE

    if dist.get_backend() != "netem":
        return None
    before, algorithm = emulator.current_network(), STATE.algorithm
    makers = [functools.partial(make, bucket_cap_mb=cap) for cap in caps] if caps else [make]
    dist.barrier()
    emulator.set_network(NETWORK)
    try:
        return [timed_run(m) for m in makers]
    finally:
        dist.barrier()
        emulator.set_network(before)
        emulator.set_algorithm(algorithm)
