"""The alpha-beta-gamma cost model: closed forms, and the cost of any schedule.

Start at :mod:`~labsupport.costmodel.formulas` (the closed forms: the time of each
algorithm), then :mod:`~labsupport.costmodel.schedule` (what any schedule costs), then
:mod:`~labsupport.costmodel.fit` (from measurements to the model). Every name is
available from ``labsupport.costmodel`` itself.
"""

# Two blocks serve measurements: busbw_factor (nccl-tests' algbw-to-busbw factors) and
# fit_alpha_beta (α and β fitted to benchmark results, which the runtime's bench and viz
# both use).
from labsupport.costmodel.fit import (
    BUSBW_FACTORS,
    DEFAULT_ALGORITHM,
    FIT_MODELS,
    NATIVE_IN_PLACE,
    AlphaBetaFit,
    as_records,
    busbw_factor,
    fit_alpha_beta,
    fit_model,
    select_rows,
    simple_model,
)

# Names: the closed form of the schedule builder schedules.X is costmodel.X_time
# (ring_all_reduce_time costs schedules.ring_all_reduce); CLOSED_FORMS maps one to the other.
from labsupport.costmodel.formulas import (
    CLOSED_FORMS,
    PORTS,
    ClosedForm,
    binomial_broadcast_time,
    binomial_reduce_time,
    direct_all_gather_time,
    direct_all_reduce_time,
    direct_reduce_scatter_time,
    double_binary_tree_all_reduce_time,
    hierarchical_all_reduce_time,
    naive_all_reduce_time,
    rabenseifner_all_reduce_time,
    recursive_doubling_all_gather_time,
    recursive_doubling_all_reduce_time,
    recursive_halving_reduce_scatter_time,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
    tree_all_reduce_time,
    whole_buffer_ring_all_reduce_time,
)

# cost counts what a Schedule really does and turns it into a time with one rule (see
# Cost.step_times); for the shipped schedules it gives back the closed forms exactly.
from labsupport.costmodel.schedule import (
    Cost,
    chunk_bytes,
    cost,
    schedule_time,
)

__all__ = [
    "AlphaBetaFit",
    "BUSBW_FACTORS",
    "CLOSED_FORMS",
    "ClosedForm",
    "Cost",
    "DEFAULT_ALGORITHM",
    "FIT_MODELS",
    "NATIVE_IN_PLACE",
    "PORTS",
    "as_records",
    "binomial_broadcast_time",
    "binomial_reduce_time",
    "busbw_factor",
    "chunk_bytes",
    "cost",
    "direct_all_gather_time",
    "direct_all_reduce_time",
    "direct_reduce_scatter_time",
    "double_binary_tree_all_reduce_time",
    "fit_alpha_beta",
    "fit_model",
    "hierarchical_all_reduce_time",
    "naive_all_reduce_time",
    "rabenseifner_all_reduce_time",
    "recursive_doubling_all_gather_time",
    "recursive_doubling_all_reduce_time",
    "recursive_halving_reduce_scatter_time",
    "ring_all_gather_time",
    "ring_all_reduce_time",
    "ring_reduce_scatter_time",
    "schedule_time",
    "select_rows",
    "simple_model",
    "tree_all_reduce_time",
    "whole_buffer_ring_all_reduce_time",
]
