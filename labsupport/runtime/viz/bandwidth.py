"""Time and busbw against message size, log-log, with the fitted α-β model drawn over the points.

    fig = plot_bandwidth(results)                  # fits the default model itself
    fig = plot_bandwidth(results, fit=my_fit)      # or draws the fit you give it

One colour per world size; points are measurements (the column torch users
call, see :func:`labsupport.costmodel.fit_alpha_beta`), the dashed line is
the model, the dotted vertical line is where its latency and bandwidth terms
are equal.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from labsupport.costmodel import (
    AlphaBetaFit,
    as_records,
    busbw_factor,
    fit_alpha_beta,
    select_rows,
)


def plot_bandwidth(
    results: Any,
    fit: AlphaBetaFit | None | bool = None,
    *,
    collective: str | None = None,
    in_place: bool | None = None,
    time: str = "time_us",
    title: str | None = None,
) -> plt.Figure:
    """Two panels, time (us) and busbw (GB/s) against size (bytes); returns the Figure.

    ``results``: records, Results, a Sweep or a DataFrame (one collective, or
    name it with ``collective``). ``fit``: an :class:`AlphaBetaFit`, None to fit
    here, False for no model. ``time``: the field plotted and fitted, "time_us"
    (the mean, as nccl-tests) or "median_us".
    """
    records = as_records(results)
    collective, rows = select_rows(records, collective, in_place)
    if fit is None and len({r["size"] for r in rows}) >= 2:
        fit = fit_alpha_beta(rows, collective, in_place=in_place, time=time)

    fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(10, 4))
    for i, p in enumerate(sorted({r["nranks"] for r in rows})):
        mine = sorted((r for r in rows if r["nranks"] == p), key=lambda r: r["size"])
        sizes = np.array([r["size"] for r in mine], dtype=float)
        colour = f"C{i}"
        times = np.array([r[time] for r in mine])
        busbw = sizes / (times * 1e-6) / 1e9 * busbw_factor(collective, p)
        ax_t.loglog(sizes, times, "o", color=colour, label=f"{p} ranks")
        ax_bw.loglog(sizes, busbw, "o", color=colour, label=f"{p} ranks")
        if fit:
            grid = np.geomspace(sizes.min(), sizes.max(), 100)
            ax_t.loglog(grid, [fit.time(s, p) * 1e6 for s in grid], "--", color=colour)
            ax_bw.loglog(grid, [fit.busbw(s, p) for s in grid], "--", color=colour)
            cross = fit.crossover(p)
            if sizes.min() <= cross <= sizes.max():
                ax_t.axvline(cross, color=colour, linestyle=":", linewidth=1)
    ax_t.set(xlabel="size (bytes)", ylabel="time (µs)", title="time per call")
    ax_bw.set(xlabel="size (bytes)", ylabel="busbw (GB/s, GB = 1e9 B)", title="bus bandwidth")
    for ax in (ax_t, ax_bw):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    where = "in-place" if in_place else "out-of-place"
    heading = title or f"{collective} ({where}, {time})"
    if fit:
        heading += f"\nfit: {fit}"
    fig.suptitle(heading, fontsize=9)
    fig.tight_layout()
    return fig
