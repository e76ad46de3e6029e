"""Pipeline parallelism: stages that pass activations forward and gradients back by send/recv.

Start at :func:`gpipe` and :func:`one_f_one_b` (what each stage does, in order), then
:func:`run_stage` (one stage running its list on a process group) and :func:`timeline`
(the same on paper: when each action starts and ends, and the bubble). GPipe: Huang et
al. (2019); 1F1B as in PipeDream-Flush: Narayanan et al. (2021), "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", §2.2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

Action = tuple[str, int]  # ("F", i): forward of micro-batch i; ("B", i): its backward


def gpipe(stage: int, stages: int, micro: int) -> list[Action]:
    """GPipe: every forward, then every backward. A stage holds all ``micro`` activations."""
    return [("F", i) for i in range(micro)] + [("B", i) for i in range(micro)]


def one_f_one_b(stage: int, stages: int, micro: int) -> list[Action]:
    """1F1B: a few forwards to fill the pipe, then one forward, one backward, ... then drain.

    Stage s runs ``stages - s - 1`` forwards ahead (its warm-up), so it never holds more
    than ``stages - s`` micro-batches' activations, however large ``micro`` is.
    """
    warm = min(stages - stage - 1, micro)
    out: list[Action] = [("F", i) for i in range(warm)]
    for i in range(micro - warm):
        out += [("F", warm + i), ("B", i)]
    return out + [("B", i) for i in range(micro - warm, micro)]


SCHEDULES: dict[str, Callable[[int, int, int], list[Action]]] = {
    "GPipe": gpipe,
    "1F1B": one_f_one_b,
}


def bubble(stages: int, micro: int) -> float:
    """The idle time over the useful time of a flushed pipeline: (p − 1) / m, for both."""
    # Every stage waits p − 1 forward slots before its first micro-batch arrives and
    # p − 1 backward slots after its last one leaves: (p − 1)(t_f + t_b) idle, against
    # m (t_f + t_b) of work (GPipe §2.2; the same for 1F1B, Narayanan et al. §2.2.1).
    return (stages - 1) / micro


def peak_activations(actions: Sequence[Action]) -> int:
    """The most micro-batches whose activations a stage holds at once (forwards not yet undone)."""
    held = peak = 0
    for kind, _ in actions:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


def timeline(
    schedule: str, stages: int, micro: int, t_fwd: float, t_bwd: float, t_send: float = 0.0
) -> dict[tuple[int, Action], tuple[float, float]]:
    """When each stage's actions start and end, on paper: {(stage, action): (start, end)}.

    An action starts when its stage is free and its input has arrived: a forward
    ``t_send`` after the previous stage's forward of that micro-batch, a backward
    ``t_send`` after the next stage's backward (the last stage's after its own forward).
    """
    lists = [SCHEDULES[schedule](s, stages, micro) for s in range(stages)]
    done: dict[tuple[int, Action], tuple[float, float]] = {}
    free, nxt = [0.0] * stages, [0] * stages
    while any(nxt[s] < len(lists[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            if nxt[s] == len(lists[s]):
                continue
            kind, i = lists[s][nxt[s]]
            dep = (s - 1, ("F", i)) if kind == "F" else (s + 1, ("B", i))
            if kind == "F" and s == 0:
                ready = 0.0
            elif kind == "B" and s == stages - 1:
                ready = done[(s, ("F", i))][1]
            elif dep in done:
                ready = done[dep][1] + t_send
            else:
                continue  # its input has not been computed yet: try another stage
            start = max(free[s], ready)
            free[s] = start + (t_fwd if kind == "F" else t_bwd)
            done[(s, (kind, i))] = (start, free[s])
            nxt[s] += 1
            moved = True
        if not moved:
            raise RuntimeError(f"{schedule}: the stages wait for each other (a deadlock)")
    return done


def run_stage(
    module: nn.Module,
    actions: Sequence[Action],
    shape: Sequence[int],
    inputs: Sequence[torch.Tensor] | None = None,
    targets: Sequence[torch.Tensor] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    work: Callable[[str], None] | None = None,
) -> tuple[list[float], int]:
    """Run this rank's stage (rank s of p is stage s) through ``actions``; (losses, peak held).

    Stage 0 reads ``inputs``; the last stage computes ``loss_fn(output, target)`` and
    returns the losses, each divided by the number of micro-batches (so the gradients
    are those of the mean loss, as one process on the whole batch). Activations and
    gradients between stages have ``shape``. ``work(kind)`` runs after each forward
    ("F") and backward ("B"), before its result is sent: emulated compute time, for example.
    """
    rank, stages = dist.get_rank(), dist.get_world_size()
    micro = sum(kind == "F" for kind, _ in actions)
    first, last = rank == 0, rank == stages - 1
    stash: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    losses: list[float] = []
    sends: list[tuple[dist.Work, torch.Tensor]] = []  # keep each tensor alive until sent
    peak = 0
    for kind, i in actions:
        if kind == "F":
            if first:
                x = inputs[i]
            else:  # the previous stage's activations for micro-batch i
                x = torch.empty(shape)
                dist.recv(x, rank - 1)
                x.requires_grad_(True)
            y = module(x)
            if work is not None:
                work("F")  # the stage's compute, before its result can leave
            if last:
                y = loss_fn(y, targets[i]) / micro
                losses.append(float(y.detach()))
            else:  # isend: a blocking send could wait for a stage that is sending to us
                out = y.detach()
                sends.append((dist.isend(out, rank + 1), out))
            stash[i] = (x, y)
            peak = max(peak, len(stash))
        else:
            x, y = stash.pop(i)  # freed here: 1F1B's gain is that this happens early
            if last:
                y.backward()
            else:  # the gradient of the loss with respect to our output, from the next stage
                grad = torch.empty(shape)
                dist.recv(grad, rank + 1)
                y.backward(grad)
            if work is not None:
                work("B")
            if not first:
                sends.append((dist.isend(x.grad, rank - 1), x.grad))
    for handle, _ in sends:
        handle.wait()
    return losses, peak
