"""Pictures for the course: per-rank data, schedules step by step, bandwidth, networks, timelines.

Each submodule has one job: ``ranks`` (one row per rank, before/after),
``schedule`` (a collective algorithm drawn or animated step by step),
``bandwidth`` (time and busbw against message size, with a fitted model),
``waitfor`` (a deadlock's wait-for cycle), ``groups`` (process groups on the node grid),
``algorithms`` (cost curves and which algorithm wins), ``topology`` (a network, a ring
laid over it, per-link busy time), ``timeline`` (per-rank spans from ``labsupport.runtime.trace``),
``table`` (rows as an HTML table in a notebook, aligned text elsewhere).
"""

from labsupport.runtime.viz.bandwidth import plot_bandwidth
from labsupport.runtime.viz.groups import draw_groups
from labsupport.runtime.viz.ranks import draw_ranks, show_ranks
from labsupport.runtime.viz.schedule import animate_schedule, draw_state, plot_schedule
from labsupport.runtime.viz.table import Table, table
from labsupport.runtime.viz.timeline import plot_timeline
from labsupport.runtime.viz.waitfor import draw_wait_for

__all__ = [
    "Table",
    "animate_schedule",
    "draw_groups",
    "draw_ranks",
    "draw_state",
    "draw_wait_for",
    "plot_bandwidth",
    "plot_schedule",
    "plot_timeline",
    "show_ranks",
    "table",
]
