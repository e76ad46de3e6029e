"""Train the course's MLP with torch's DDP and a compression hook: loss, bytes and time per step.

Runs on every rank (``cluster.run(train, "powersgd", steps=100)``). The data is
learnable, unlike notebook 07's random targets: a fixed random "teacher" network
gives ``y = tanh(x A) B``, so the loss falls and compression's effect on
convergence shows. Every rank draws its own rows of the same global batch.

Each step is timed as every loop of the course is
(:func:`labsupport.runtime.bench.timing.time_iterations`: ranks lined up, the clock around the
step). Per step it records:

* the bytes this rank sent on the emulated network during the step
  (:func:`labsupport.runtime.emulator.traffic`, payload only), summed over the ranks at the end;
* the step's seconds (forward, backward with the hook's communication, optimizer),
  the slowest rank's;
* the loss on the rank's rows, averaged over the ranks at the end.

All three are reduced over the ranks once, after the last step, so the
reductions add no traffic to the steps they measure.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from labsupport import netem
from labsupport.compress.hooks import register
from labsupport.runtime import emulator
from labsupport.runtime.bench.timing import time_iterations
from labsupport.runtime.experiments.workload import Config, loss_fn, make_model


def teacher_batch(step: int, rank: int, world_size: int, cfg: Config) -> tuple[torch.Tensor, ...]:
    """This rank's rows of step ``step``'s global batch; targets from a fixed teacher network."""
    if cfg.batch % world_size:
        raise ValueError(f"the batch {cfg.batch} must split evenly over {world_size} ranks")
    teacher = torch.Generator().manual_seed(12345)
    a = torch.randn(cfg.in_features, 32, generator=teacher) / cfg.in_features**0.5
    b = torch.randn(32, cfg.out_features, generator=teacher) / 32**0.5
    g = torch.Generator().manual_seed(1000 * cfg.seed + step)
    x = torch.randn(cfg.batch, cfg.in_features, generator=g)
    y = torch.tanh(4 * x @ a) @ b
    n = cfg.batch // world_size
    return x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]


def _sent() -> int:
    return emulator.traffic()["bytes_sent"] if emulator.current_network() else 0


def _cpu() -> float:
    """CPU seconds so far on the emulated clocks: every thread's (the step's compute and its
    hook's callbacks) and the collectives' reductions."""
    if not emulator.current_network():
        return 0.0
    return emulator.clock.cpu_charged(every_thread=True) + emulator.traffic()["reduce_seconds"]


def train(
    method: str = "none",
    steps: int = 100,
    cfg: Config | None = None,
    *,
    momentum: float = 0.9,
    **hook_options: Any,
) -> dict[str, Any]:
    """On every rank: ``steps`` steps of DDP with ``method``'s hook (see :mod:`.hooks`).

    Returns the loss, the bytes all ranks sent and the slowest rank's seconds, per step,
    plus the shapes of the gradients and the sizes of the buckets the hook saw. On an
    emulated network also ``model``: per step, the link model's time of the collectives
    the step called, one after the other (:func:`labsupport.netem.calls_time`), plus the
    CPU time it measured (compute, the hook's callbacks, reductions); the slowest rank's.
    ``messages`` is that link-model time alone, without the CPU time: what the α-β model of
    the counted messages says by itself (``model`` agrees with the measurement by
    construction, since it adds the CPU time the step measured).
    """
    cfg = cfg or Config()
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(make_model(cfg), bucket_cap_mb=1024)  # one bucket
    state = register(model, method, **hook_options)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=momentum)
    losses: list[float] = []
    sent: list[int] = []
    batch: list[tuple[torch.Tensor, ...]] = []

    def make_batch(i: int) -> None:  # outside the clock
        batch[:] = [teacher_batch(i, rank, world, cfg)]

    net = emulator.current_network()
    parts: list[tuple[list, float]] = []  # per step: the collectives called, the CPU seconds

    def step(i: int) -> None:
        (x, y), before = batch[0], _sent()
        cpu = _cpu()
        with emulator.recording() as calls:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()  # DDP's hook runs here; backward returns once every bucket is done
            opt.step()
        parts.append((calls, _cpu() - cpu))
        sent.append(_sent() - before)
        losses.append(loss.item())

    seconds = time_iterations(step, steps, warmup=0, before=make_batch, over_ranks=False).mine
    wire = [netem.calls_time(c, world, net) for c, _ in parts] if net else []
    modelled = [w + cpu for w, (_, cpu) in zip(wire, parts, strict=False)]
    loss_t, sent_t = torch.tensor(losses), torch.tensor(sent, dtype=torch.float64)
    secs_t, model_t = torch.tensor(seconds), torch.tensor(modelled, dtype=torch.float64)
    wire_t = torch.tensor(wire, dtype=torch.float64)
    dist.all_reduce(loss_t)
    dist.all_reduce(sent_t)
    dist.all_reduce(secs_t, op=dist.ReduceOp.MAX)
    dist.all_reduce(model_t, op=dist.ReduceOp.MAX)
    dist.all_reduce(wire_t, op=dist.ReduceOp.MAX)
    buckets = getattr(state, "bucket_sizes", None)
    return {
        "method": method,
        "loss": (loss_t / world).tolist(),
        "bytes": [int(b) for b in sent_t.tolist()],
        "seconds": secs_t.tolist(),
        "model": model_t.tolist() or None,
        "messages": wire_t.tolist() or None,
        "shapes": [tuple(p.shape) for p in model.parameters()],
        "buckets": [buckets[i] for i in sorted(buckets)] if buckets else None,
    }
