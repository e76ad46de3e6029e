"""Exercise graders: run your function on every rank next to a reference, and say what differed.

Every grader shows one kind message and returns a :class:`CheckResult` (true when
passed). A message starts with its status as a word, ``PASS``, ``FAIL`` or ``TODO``
(coloured in JupyterLab, plain text elsewhere), then says what it found, one line
per rank or per fact, the most useful first. A grader never raises because of your
answer, so a notebook's "Run All" goes on past an unfinished exercise, and it never
passes a function that still raises ``NotImplementedError`` (it says "not
implemented yet" instead).

* :func:`check_on_ranks` - call ``reference(*args)`` then ``fn(*args)`` on every rank of a
  :class:`~labsupport.runtime.launch.Cluster` (``args`` built on each rank by ``make_args``) and
  compare the results rank by rank.
* :func:`check_function` - the same for a plain function run here, on a list of cases.
* :func:`check_values` - compare values you predicted with the real ones.
* :func:`describe_difference` - the comparison itself: None when equal, else a sentence.
* :func:`cluster_for_check` - which cluster a check runs on (the running one by default).

Write a grader for a new exercise in ``labsupport/runtime/check/<topic>.py`` as a reference
function plus a ``make_args(rank, world_size)`` that builds each rank's inputs, and
call :func:`check_on_ranks` (see ``check/primitives.py``).

Tensors are compared exactly when ``exact=True`` or when they hold integers, and with
``torch.allclose(rtol, atol)`` otherwise; lists, tuples and dicts element by element.

The package: :mod:`~labsupport.runtime.check.messages` (what a check says: PASS / FAIL / TODO,
the difference between two values), :mod:`~labsupport.runtime.check.core` (running a function
next to a reference), and one module of graders per notebook (``primitives`` for 01-02,
``ring`` 03, ``algorithms`` 04, ``topology`` 05, ``bandwidth`` 06, ``overlap`` 07,
``scaling`` 08, ``troubleshooting`` 09, ``capstone`` 10, which also grades a folder of
learners' notebooks with the help of :mod:`~labkit.notebooks`: each learner in
a process of its own, :mod:`~labkit.room` grading it from outside,
:mod:`~labkit.watch` keeping it within its limits, :mod:`~labkit.learner`
the process itself), ``sharding`` 11 and ``parallel`` 12; 07 and 10 share what they
run on the ranks (:mod:`~labsupport.runtime.check.dataparallel`) and how they judge it
(:mod:`~labsupport.runtime.check.ddp_judge`, and overlap by time:
:mod:`~labsupport.runtime.check.overlap_timing`); 11's grader owns its clock too, on
ranks of its own. A notebook prints a difference that is
rounding noise through :func:`~labsupport.runtime.check.agreement.agreement`, in words
that rounding cannot change, with the graders' tolerances.
"""

from labsupport.runtime.check.core import (
    check_function,
    check_on_ranks,
    check_values,
    cluster_for_check,
)
from labsupport.runtime.check.messages import (
    FAIL,
    PASS,
    TODO,
    CheckResult,
    as_html,
    describe_difference,
    explain_failure,
    per_rank_message,
    report,
)

__all__ = [
    "FAIL",
    "PASS",
    "TODO",
    "CheckResult",
    "as_html",
    "check_function",
    "check_on_ranks",
    "check_values",
    "cluster_for_check",
    "describe_difference",
    "explain_failure",
    "per_rank_message",
    "report",
]
