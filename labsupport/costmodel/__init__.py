"""The alpha-beta-gamma cost model: closed forms, and the cost of any schedule.

alpha is the latency of one message (s), beta the time per byte on a link
(s/B), gamma the time per byte to reduce (s/B); ``n`` is the buffer size in
bytes and ``p`` the number of ranks. The closed forms are the ones of Thakur,
Rabenseifner & Gropp (2005), "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), and HCCL's algorithm documentation (see
REFERENCES.md). **Names:** the closed form of the schedule builder
``schedules.X`` is ``costmodel.X_time`` (``ring_all_reduce_time`` costs
``schedules.ring_all_reduce``); :data:`CLOSED_FORMS` maps one to the other.

:func:`cost` counts what a :class:`~labsupport.schedules.Schedule` really does
(bytes and messages per rank and per step) and turns that into a time with one
rule, the model's usual one: in a step every rank can send one stream and
receive one stream at once (full duplex, one port), so a step lasts as long as
its busiest rank::

    step time = max over ranks of  alpha * messages + beta * bytes + gamma * bytes reduced

where messages and bytes are the larger of what the rank sends and receives.
For the shipped schedules this rule gives back the closed forms exactly, for
every world size they accept (tests/test_costmodel.py checks it).
``ports="all"`` is the other rule, for a full mesh (HCCS, NVSwitch): every
ordered pair of ranks has its own link, so a step lasts as long as its busiest
link; the direct (mesh) algorithms are built for it.

Two blocks serve measurements: :func:`busbw_factor` (nccl-tests' algbw-to-busbw
factors) and :func:`fit_alpha_beta` (α and β fitted to benchmark results, which
:mod:`labsupport.runtime.bench` and :mod:`labsupport.runtime.viz` both use).

The package: :mod:`~labsupport.costmodel.formulas` (closed forms),
:mod:`~labsupport.costmodel.schedule` (the cost of any schedule) and
:mod:`~labsupport.costmodel.fit` (busbw factors, fitting α and β); every name is
available from ``labsupport.costmodel`` itself.
"""

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
