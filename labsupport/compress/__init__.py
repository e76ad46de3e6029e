"""Gradient compression for data-parallel training: fp16, PowerSGD, top-k with error feedback.

Each method exists twice: as a plain function on a flat gradient that you can read top
to bottom, and as a DDP communication hook (torch's own where it has one). Read in this
order: ``wire``, ``fp16``, ``powersgd``, ``topk``, ``hooks`` (each import below says what
its module holds).
"""

# fp16: half-precision all-reduce; the bf16 hook gloo accepts.
from labsupport import _moved  # the old names' aliases (one release)
from labsupport.compress.fp16 import bf16_allreduce_hook, fp16_allreduce

# hooks: the methods as DDP comm hooks, by name.
from labsupport.compress.hooks import METHODS, TopKState, register, topk_hook

# powersgd: PowerSGD for one matrix, written out.
from labsupport.compress.powersgd import PowerSGD, orthonormalize

# topk: top-k, the wrong all-reduce, the all-gather, error feedback.
from labsupport.compress.topk import (
    TopK,
    allgather_pairs,
    sparse,
    topk,
    topk_allgather,
    topk_allreduce_wrong,
    topk_error_feedback,
    topk_wrong_and_right,
)

# wire: bytes per step of each method, from a formula.
from labsupport.compress.wire import (
    powersgd_split,
    ring_allgather_bytes,
    ring_allreduce_bytes,
    step_bytes,
    topk_count,
)

__all__ = [
    "METHODS",
    "PowerSGD",
    "TopK",
    "TopKState",
    "allgather_pairs",
    "bf16_allreduce_hook",
    "fp16_allreduce",
    "orthonormalize",
    "powersgd_split",
    "register",
    "ring_allgather_bytes",
    "ring_allreduce_bytes",
    "sparse",
    "step_bytes",
    "topk",
    "topk_allgather",
    "topk_allreduce_wrong",
    "topk_count",
    "topk_error_feedback",
    "topk_hook",
    "topk_wrong_and_right",
]


def __getattr__(name: str) -> object:
    """Names this package exported before the split into core and runtime (one release)."""
    return _moved.attribute(__name__, name)
