"""Collective algorithms written once, as data: a schedule is a list of steps of transfers.

Start with :mod:`~labsupport.schedules.model` (what a transfer, a step and a schedule are),
then :mod:`~labsupport.schedules.ring` (the ring of notebook 03, in plain code). One
schedule is executed on a real process group (:func:`execute`), costed with the α-β-γ
model (:func:`labsupport.costmodel.cost`) and animated (the runtime's ``viz.schedule``)::

    sched = ring_all_reduce(4)
    print(format_steps(sched))       # who sends which chunk to whom, step by step
    verify(sched)                    # the schedule really computes an all-reduce
    execute(sched, tensor)           # on every rank of an initialised process group

Modules: ``model`` (Transfer, Step, Rotation, Schedule, chunk_bounds), ``ring`` (the ring
in plain code), ``compact`` (the same ring for thousands of ranks: skip on a first
reading), ``builders`` (direct/mesh, binomial tree; the exported ring is ``compact``'s),
``halving`` (recursive doubling and halving, Rabenseifner, the fold for other world
sizes), ``twolevel`` (hierarchical), ``trees`` (NCCL's double binary tree), ``registry``
(BUILDERS by name), ``replay`` (verify on paper, format_steps), ``execute`` (run on a
process group).
"""

from labsupport.schedules.builders import (
    binomial_broadcast,
    binomial_reduce,
    direct_all_gather,
    direct_all_reduce,
    direct_reduce_scatter,
    naive_all_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    tree_all_reduce,
)
from labsupport.schedules.execute import execute
from labsupport.schedules.halving import (
    ORDERS,
    rabenseifner_all_reduce,
    recursive_doubling_all_gather,
    recursive_doubling_all_reduce,
    recursive_halving_reduce_scatter,
)
from labsupport.schedules.model import (
    COLLECTIVES,
    Rotation,
    Schedule,
    ScheduleError,
    Step,
    Transfer,
    chunk_bounds,
)
from labsupport.schedules.registry import BUILDERS, supports
from labsupport.schedules.replay import (
    chunk_history,
    coverage,
    expected_state,
    format_steps,
    initial_owner,
    initial_state,
    verify,
)
from labsupport.schedules.trees import double_binary_tree, double_binary_tree_all_reduce
from labsupport.schedules.twolevel import hierarchical_all_reduce

__all__ = [
    "BUILDERS",
    "COLLECTIVES",
    "ORDERS",
    "Rotation",
    "Schedule",
    "ScheduleError",
    "Step",
    "Transfer",
    "binomial_broadcast",
    "binomial_reduce",
    "chunk_bounds",
    "coverage",
    "direct_all_gather",
    "direct_all_reduce",
    "direct_reduce_scatter",
    "double_binary_tree",
    "double_binary_tree_all_reduce",
    "execute",
    "expected_state",
    "format_steps",
    "hierarchical_all_reduce",
    "initial_owner",
    "initial_state",
    "naive_all_reduce",
    "rabenseifner_all_reduce",
    "recursive_doubling_all_gather",
    "recursive_doubling_all_reduce",
    "recursive_halving_reduce_scatter",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
    "chunk_history",
    "supports",
    "tree_all_reduce",
    "verify",
]
