"""Per-rank timelines: one row per rank and lane (compute, comm), one colour per span name.

    spans = trace.merge(cluster.run(train, steps=20))
    plot_timeline(spans, title="bucketed DDP")

Rows of one rank are grouped (rank 0 compute, rank 0 comm, rank 1 ...). When
spans of one lane overlap (two buckets in flight at once) the lane gets an
extra row ("comm 2") rather than bars drawn over each other. Time zero is the
earliest start; the spans need to be on one clock already (one host, or
:func:`labsupport.runtime.trace.align` with an anchor).
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from labsupport.runtime.trace import Span, merge, tracks

_BAR_HEIGHT = 0.7


def _colours(names: list[str], given: dict[str, str] | None) -> dict[str, str]:
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    auto = {n: palette(i % palette.N) for i, n in enumerate(names)}
    return {**auto, **(given or {})}


def plot_timeline(
    spans: Iterable[Span],
    ax: plt.Axes | None = None,
    *,
    title: str | None = None,
    colors: dict[str, str] | None = None,
    legend: bool = True,
) -> plt.Axes:
    """Draw the spans (of all ranks) on ``ax`` (a new figure if None); returns the Axes.

    ``colors``: name -> matplotlib colour, for names you want fixed (the
    others get tab10 colours in order of first appearance). Time in ms.
    """
    spans = merge([spans])
    if not spans:
        raise ValueError("no spans to draw: did the ranks record any (trace.spans())?")
    rows = [
        (rank, lane, i, row)
        for (rank, lane), lane_rows in tracks(spans).items()
        for i, row in enumerate(lane_rows)
    ]
    names = list(dict.fromkeys(s.name for s in spans))
    colour = _colours(names, colors)
    zero = min(s.start_ns for s in spans)

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 1.0 + 0.35 * len(rows)))
    labels = []
    for y, (rank, lane, i, row) in enumerate(rows):
        labels.append(f"rank {rank} {lane}" + (f" {i + 1}" if i else ""))
        by_name: dict[str, list[tuple[float, float]]] = {}
        for s in row:
            by_name.setdefault(s.name, []).append(((s.start_ns - zero) / 1e6, s.duration_ns / 1e6))
        for name, bars in by_name.items():
            ax.broken_barh(
                bars,
                (y - _BAR_HEIGHT / 2, _BAR_HEIGHT),
                facecolors=colour[name],
                edgecolor="white",
                linewidth=0.3,
            )
        if y and rows[y - 1][0] != rank:  # a line between ranks
            ax.axhline(y - 0.5, color="0.6", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # rank 0 on top
    end = max(s.end_ns for s in spans)
    ax.set_xlim(0, (end - zero) / 1e6 * 1.01 or 1.0)
    ax.set_xlabel("time (ms)")
    ax.grid(True, axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        handles = [Patch(facecolor=colour[n], label=n) for n in names]
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False
        )
    ax.figure.tight_layout()
    return ax
