"""Sharded data parallelism, ZeRO-2 and ZeRO-3 (FSDP), by hand (notebook 11).

Read in this order: ``memory`` (what a rank holds and sends, by stage: the formulas),
``zero`` (the wrapper: a layer's parameters gathered before use and freed after),
``predict`` (what prefetching the next layer's all-gather hides, on paper). ZeRO-1, an
optimizer, is :class:`labsupport.ddp.ZeRO1` (notebook 10).
"""

# memory: model states per rank and bytes per step, by stage and precision (Ψ parameters).
from labsupport.sharding.memory import (
    NAMES,
    PRECISIONS,
    collectives,
    model_states,
    step_bytes,
    total,
)

# predict: a ZeRO-3 step's time on one link, with and without prefetch.
from labsupport.sharding.predict import hidden_by_prefetch, zero3_step

# zero: FlatUnit (a layer's parameters, sharded), ZeRO3 and ZeRO2 (nn.Module wrappers).
from labsupport.sharding.zero import FlatUnit, ZeRO2, ZeRO3

__all__ = [
    "NAMES",
    "PRECISIONS",
    "FlatUnit",
    "ZeRO2",
    "ZeRO3",
    "collectives",
    "hidden_by_prefetch",
    "model_states",
    "step_bytes",
    "total",
    "zero3_step",
]
