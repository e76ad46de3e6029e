"""Model parallelism, by hand (notebook 12): tensor, sequence, pipeline and expert, and layouts.

Read in this order: ``tensor``, ``pipeline``, ``moe``, ``layout`` (each import below
says what its module holds).
"""

# tensor: Megatron's f and g, the column- then row-parallel MLP, its sequence-parallel twin.
# layout: a workload's collective classes per step on a cluster, every layout ranked.
from labsupport.parallel.layout import (
    GPT3_175B,
    Cluster,
    Layout,
    Workload,
    best,
    candidates,
    collectives,
    placement,
    step_time,
)

# moe: dispatch and combine by all_to_all_single with uneven splits, top-1 routing.
from labsupport.parallel.moe import MoE, all_to_all, imbalance, moe_reference, route

# pipeline: GPipe and 1F1B as lists of actions, a stage that runs one, the bubble on paper.
from labsupport.parallel.pipeline import (
    SCHEDULES,
    bubble,
    gpipe,
    one_f_one_b,
    peak_activations,
    run_stage,
    timeline,
)
from labsupport.parallel.tensor import ParallelMLP, SequenceParallelMLP, f, g

__all__ = [
    "GPT3_175B",
    "SCHEDULES",
    "Cluster",
    "Layout",
    "MoE",
    "ParallelMLP",
    "SequenceParallelMLP",
    "Workload",
    "all_to_all",
    "best",
    "bubble",
    "candidates",
    "collectives",
    "f",
    "g",
    "gpipe",
    "imbalance",
    "moe_reference",
    "one_f_one_b",
    "peak_activations",
    "placement",
    "route",
    "run_stage",
    "step_time",
    "timeline",
]
