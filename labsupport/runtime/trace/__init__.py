"""Per-rank timelines of compute and communication.

On every rank, mark what you want to see (``record``: a list of tuples, two
clock reads per span)::

    from labsupport.runtime import trace

    def train(steps):
        trace.reset()
        for _ in range(steps):
            with trace.span("forward"):
                loss = model(x).sum()
            with trace.span("backward"):
                loss.backward()
            work = trace.comm(dist.all_reduce, flat_grads, async_op=True)
            work.wait()
        return trace.spans()

To record the collectives some code calls, without changing it (your DDP's
hooks, say), wrap it in ``with trace.collectives() as calls:``: each call is a
span on the timeline and a :class:`Call` (size, asynchronous or not, issued and
waited for during backward or not).

Then, on the kernel, put the ranks together (``merge``), on one time axis
(``align``), and look: ``lab.viz.plot_timeline(spans)``, or
``trace.write_chrome(spans, "t.json")`` for Perfetto. ``compare_ends`` shows
why a collective's duration on one rank is not its cost: it includes waiting
for the slowest peer (compare end times, not durations).
"""

from labsupport.runtime.trace.chrome import backend_ops, from_profiler, to_chrome, write_chrome
from labsupport.runtime.trace.collectives import TRACED, Call, collectives
from labsupport.runtime.trace.merge import (
    CollectiveEnds,
    align,
    compare_ends,
    format_ends,
    gather,
    merge,
    tracks,
)
from labsupport.runtime.trace.record import COMM, COMPUTE, Recorder, Span, default, now_ns

__all__ = [
    "COMM",
    "COMPUTE",
    "TRACED",
    "Call",
    "CollectiveEnds",
    "Recorder",
    "Span",
    "align",
    "backend_ops",
    "begin",
    "collectives",
    "comm",
    "compare_ends",
    "default",
    "end",
    "format_ends",
    "from_profiler",
    "gather",
    "merge",
    "now_ns",
    "reset",
    "span",
    "spans",
    "to_chrome",
    "tracks",
    "watch",
    "write_chrome",
]

# The default recorder of this process (one per rank), as module functions.
span = default().span
begin = default().begin
end = default().end
comm = default().comm
watch = default().watch
spans = default().spans
reset = default().reset
