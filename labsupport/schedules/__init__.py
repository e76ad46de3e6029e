"""Collective algorithms written once, as data.

A *schedule* is a list of steps. A step is a set of transfers that happen at
the same time. A transfer says: rank ``src`` sends the chunks ``chunks`` of
its buffer to rank ``dst``, and ``dst`` either adds them into its own copy
(``reduce=True``) or overwrites its copy with them (``reduce=False``).

The buffer (a tensor of ``n`` elements) is cut into ``num_chunks`` chunks the
way ``torch.tensor_split`` does it: sizes differ by at most one element, the
larger chunks first, and chunks may be empty when ``n < num_chunks``.

One schedule is used three ways:

- executed on a real process group: :func:`execute`;
- costed with the alpha-beta-gamma model: :func:`labsupport.costmodel.cost`;
- animated, step by step: :mod:`labsupport.viz.schedule`.

Example, ring all-reduce on 4 ranks::

    sched = ring_all_reduce(4)
    print(format_steps(sched))       # who sends which chunk to whom, step by step
    verify(sched)                    # the schedule really computes an all-reduce
    execute(sched, tensor)           # on every rank of an initialised process group

Within a step every rank sends what it held at the *start* of the step, then
applies what it received, in the order the transfers are listed. Two ranks
that swap the same chunk (recursive doubling) therefore both end with the sum.

The ring is written in plain code, the rule of notebook 03 one transfer at a
time, in ``ring`` (start reading there). The ring this package exports builds
the same transfers in ``compact``: a phase's steps are stored as one
:class:`Rotation` rule plus a shift per step, not as arrays per step, so a
4096-rank ring (33 million transfers) builds in milliseconds; ``step.start`` and
``step.stop`` are computed when asked.

Modules: ``model`` (Transfer, Step, Rotation, Schedule, chunk_bounds), ``ring``
(the ring in plain code), ``compact`` (the same ring for thousands of ranks),
``builders`` (the ring from ``compact``, direct/mesh, binomial tree),
``halving`` (recursive doubling and halving, Rabenseifner, the fold for other
world sizes), ``twolevel`` (hierarchical), ``trees`` (NCCL's double binary
tree), ``registry`` (BUILDERS by name),
``replay`` (chunk_history and verify on paper, format_steps), ``execute`` (run on a
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
