"""Pictures of every rank's data: one row per rank, before and after a collective.

Two ways to call :func:`show_ranks`:

* in the notebook, on gathered results (one entry per rank)::

      before = cluster.run(lambda: make_input())
      after = cluster.run(lambda: do_collective())
      viz.show_ranks(before, after, title="all_reduce(SUM)")    # returns the Figure

* inside a rank (a ``%%ranks`` cell, or a function given to ``cluster.run``), on this
  rank's own data: every rank must call it (it gathers the data with
  ``all_gather_object``); rank 0 draws the figure and leaves it open, and the
  launcher shows it under the cell::

      viz.show_ranks(x_before, x, title="broadcast from rank 0")

A rank's entry may be a tensor (any shape; drawn flattened), a number, a list of
tensors (drawn as separate chunks, e.g. ``all_gather``'s list form), None (drawn
as "no data", e.g. ``gather``'s output on a non-root rank), or a short note (a str,
e.g. ``"undefined"``, drawn in place of the data). Cells are coloured by
value with one colour scale for both panels, so a value keeps its colour as it moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Rows = list[list[np.ndarray] | str | None]
_NO_PANEL: Any = object()  # show_ranks(before) alone: no "after" panel

_MAX_ANNOTATED = 24  # write values in the cells only when a row is this short
_GAP = 0.35  # space between the chunks of a list entry, in cells


def _chunk(value: Any) -> np.ndarray:
    """One tensor, array or number as a flat numpy array (on the CPU)."""
    if hasattr(value, "detach"):  # a torch.Tensor, on any device
        value = value.detach().cpu()
        if value.dtype.is_floating_point and value.dtype.itemsize < 4:
            value = value.float()  # numpy has no bfloat16
        value = value.numpy()
    return np.asarray(value).reshape(-1)


def _row(entry: Any) -> list[np.ndarray] | str | None:
    """One rank's entry as a list of chunks, a note (str), or None for "no data"."""
    if entry is None or isinstance(entry, str):
        return entry
    if isinstance(entry, list | tuple):
        return [_chunk(x) for x in entry]
    return [_chunk(entry)]


def _rows(per_rank: Sequence[Any]) -> Rows:
    return [_row(entry) for entry in per_rank]


def _gathered(before: Any, after: Any) -> tuple[Rows, Rows | None]:
    """Every rank's rows, on every rank: a collective, so all ranks must call it.

    One ``all_gather_object`` carries both panels, so ranks with no "after" data (None,
    e.g. gather's output off the root) still take part in the same collective.
    """
    import torch.distributed as dist

    mine = (_row(before), None if after is _NO_PANEL else _row(after), after is not _NO_PANEL)
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    rows_before = [b for b, _, _ in everyone]
    two_panels = any(has_after for _, _, has_after in everyone)
    return rows_before, ([a for _, a, _ in everyone] if two_panels else None)


def _label(value: float, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:.3g}"


def _draw_panel(ax: Any, rows: Rows, width: float, norm: Any, cmap: Any, title: str) -> None:
    from matplotlib.patches import Rectangle

    for rank, row in enumerate(rows):
        y = rank
        if row is None or isinstance(row, str):
            note = "(no data)" if row is None else f"({row})"
            ax.text(0.1, y, note, va="center", ha="left", color="0.5", style="italic")
            continue
        count = sum(len(c) for c in row)
        annotate = count <= _MAX_ANNOTATED
        x = 0.0
        for chunk in row:
            integer = chunk.dtype.kind in "iub"
            for value in chunk:
                colour = cmap(norm(float(value)))
                ax.add_patch(Rectangle((x, y - 0.4), 0.92, 0.8, facecolor=colour, edgecolor="0.3"))
                if annotate:
                    light = sum(colour[:3]) / 3 < 0.5
                    ax.text(
                        x + 0.46,
                        y,
                        _label(float(value), integer),
                        ha="center",
                        va="center",
                        fontsize=9,
                        color="white" if light else "black",
                    )
                x += 1
            x += _GAP
    ax.set_xlim(-0.1, max(width, 1.0))
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_yticks(range(len(rows)), [f"rank {r}" for r in range(len(rows))])
    ax.set_xticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(left=False)
    ax.set_title(title)


def _width(rows: Rows) -> float:
    widths = [
        sum(len(c) for c in row) + _GAP * (len(row) - 1) for row in rows if isinstance(row, list)
    ]
    return max(widths, default=1.0)


def draw_ranks(
    before: Rows,
    after: Rows | None = None,
    *,
    title: str | None = None,
    labels: tuple[str, str] | None = None,
) -> Figure:
    """Draw already-normalised rows (one list of chunks, or None, per rank); returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    if labels is None:
        labels = ("before", "after") if after is not None else ("", "")
    panels = [(before, labels[0])] + ([(after, labels[1])] if after is not None else [])
    values = [
        float(v)
        for rows, _ in panels
        for row in rows
        if isinstance(row, list)
        for c in row
        for v in c
    ]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    norm = Normalize(vmin=low, vmax=high if high > low else low + 1)
    cmap = plt.get_cmap("YlGnBu")
    widths = [_width(rows) for rows, _ in panels]
    ranks = max(len(rows) for rows, _ in panels)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(min(16, 1.5 + 0.45 * sum(widths) + 1.2 * len(panels)), 0.9 + 0.45 * ranks),
        gridspec_kw={"width_ratios": [max(w, 2) for w in widths]},
        squeeze=False,
    )
    for ax, (rows, label), width in zip(axes[0], panels, widths, strict=True):
        _draw_panel(ax, rows, width, norm, cmap, label)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def show_ranks(
    before: Any,
    after: Any = _NO_PANEL,
    *,
    title: str | None = None,
    labels: tuple[str, str] | None = None,
    gather: bool | None = None,
) -> Figure:
    """Draw every rank's data as one row per rank, before (and after) an operation.

    In the notebook, ``before``/``after`` hold one entry per rank; the Figure is returned
    (it shows as the cell's result). Inside a rank (``gather=True``, the default when a
    process group is initialised) they hold this rank's own data; every rank must call
    it, rank 0 draws the figure and leaves it open for the launcher to bring back to
    the notebook, and every rank returns None.
    """
    import matplotlib.pyplot as plt

    if gather is None:
        import torch.distributed as dist

        gather = dist.is_available() and dist.is_initialized()
    if gather:
        import torch.distributed as dist

        rows_before, rows_after = _gathered(before, after)
        if dist.get_rank() == 0:
            draw_ranks(rows_before, rows_after, title=title, labels=labels)
        return None
    rows_before = _rows(before)
    rows_after = None if after is _NO_PANEL or after is None else _rows(after)
    fig = draw_ranks(rows_before, rows_after, title=title, labels=labels)
    plt.close(fig)  # shown once, as the cell's value, not again by the inline backend
    return fig
