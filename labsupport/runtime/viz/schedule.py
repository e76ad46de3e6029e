"""Pictures of a schedule, step by step: which chunk each rank holds, and how much of the sum.

A grid per step: one row per rank, one column per chunk. A cell's colour says
how many ranks' inputs that chunk contains (white: nothing useful yet, dark:
the whole sum); for up to 16 ranks the cell also says which ones ("0+3", or
"Σ" for all). Arrows show the transfers of the step about to run: red adds
into the receiver's chunk, green overwrites it.

* :func:`plot_schedule` draws every step as small multiples (a static figure
  that survives in a rendered notebook);
* :func:`draw_state` draws one step on an axes;
* :func:`animate_schedule` puts :func:`draw_state` behind an ipywidgets slider
  and play button.

Example::

    from labsupport.schedules import ring_all_reduce
    plot_schedule(ring_all_reduce(4))
    animate_schedule(ring_all_reduce(4))   # in JupyterLab
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.runtime.language import _
from labsupport.schedules import Schedule, chunk_history, coverage

if TYPE_CHECKING:
    import ipywidgets
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_LABEL_MAX_RANKS = 16  # above this, cells are not labelled and bit sets are not kept
_ARROW_MAX = 64  # above this many transfers in a step, arrows are left out
_REDUCE_COLOR, _COPY_COLOR = "tab:red", "tab:green"


def _full(schedule: Schedule) -> int:
    """How many inputs a finished chunk holds: p for reductions, 1 for copies."""
    return 1 if schedule.collective in ("broadcast", "all_gather") else schedule.world_size


def _label(bits: int, p: int) -> str:
    members = [i for i in range(p) if bits >> i & 1]
    if not members:
        return ""
    if len(members) == p and p > 1:
        return "Σ"
    if len(members) <= 3:
        return "+".join(map(str, members))
    return f"{len(members)}/{p}"


def state_at(schedule: Schedule, step: int) -> np.ndarray:
    """How many inputs each (rank, chunk) holds after ``step`` steps (0: the start)."""
    if not 0 <= step <= len(schedule):
        raise ValueError(f"step must be between 0 and {len(schedule)}, got {step}")
    for i, counts in enumerate(coverage(schedule)):
        if i == step:
            return counts.copy()
    raise AssertionError("unreachable")


def draw_state(
    schedule: Schedule, step: int, ax: Axes | None = None, labels: list | None = None
) -> Axes:
    """Draw the state after ``step`` steps, with arrows for the transfers of the next step.

    ``labels`` (optional) are the bit sets of :func:`labsupport.schedules.chunk_history`
    for this step; they are computed when missing and the group is small.
    Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    p, k = schedule.world_size, schedule.num_chunks
    if ax is None:
        _, ax = plt.subplots(figsize=_panel_size(schedule))
    shade = _shrink(state_at(schedule, step) / _full(schedule))
    ax.imshow(
        shade,
        cmap="Blues",
        vmin=0,
        vmax=1.6,
        aspect="auto",
        interpolation="nearest",
        extent=(-0.5, k - 0.5, p - 0.5, -0.5),
    )
    small = p <= _LABEL_MAX_RANKS and k <= _LABEL_MAX_RANKS
    if small:
        bits = labels if labels is not None else chunk_history(schedule)[step]
        for r in range(p):
            for c in range(k):
                ax.text(c, r, _label(bits[r][c], p), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(k), [f"c{c}" for c in range(k)], fontsize=8)
        ax.set_yticks(range(p), [f"rank {r}" for r in range(p)], fontsize=8)
        ax.set_xticks(np.arange(-0.5, k), minor=True)
        ax.set_yticks(np.arange(-0.5, p), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
    else:
        ax.set_xlabel("chunk")
        ax.set_ylabel("rank")
    if step < len(schedule) and len(schedule.steps[step]) <= _ARROW_MAX:
        for t in schedule.steps[step]:
            x = (t.chunks.start + t.chunks.stop - 1) / 2
            color = _REDUCE_COLOR if t.reduce else _COPY_COLOR
            ax.annotate(
                "",
                xy=(x + 0.15, t.dst),
                xytext=(x + 0.15, t.src),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": color,
                    "lw": 1.4,
                    "connectionstyle": "arc3,rad=0.25",
                },
            )
    done = step == len(schedule)
    ax.set_title("done" if done else f"step {step}", fontsize=9)
    return ax


def _shrink(grid: np.ndarray, most: int = 256) -> np.ndarray:
    """Average blocks of cells so that a big grid (1024 ranks) draws quickly."""
    f = -(-max(grid.shape) // most)
    if f == 1:
        return grid
    rows, cols = -(-grid.shape[0] // f) * f, -(-grid.shape[1] // f) * f
    padded = np.pad(grid, ((0, rows - grid.shape[0]), (0, cols - grid.shape[1])), mode="edge")
    return padded.reshape(rows // f, f, cols // f, f).mean(axis=(1, 3))


def _panel_size(schedule: Schedule) -> tuple[float, float]:
    p, k = schedule.world_size, schedule.num_chunks
    if p > _LABEL_MAX_RANKS or k > _LABEL_MAX_RANKS:
        return (5.0, 5.0)
    return (0.55 * k + 1.2, 0.4 * p + 0.7)


def plot_schedule(schedule: Schedule, columns: int = 4, title: str | None = None) -> Figure:
    """Every step of ``schedule`` as small multiples (for up to 16 ranks); returns the Figure."""
    import matplotlib.pyplot as plt

    if schedule.world_size > _LABEL_MAX_RANKS:
        raise ValueError("plot_schedule draws up to 16 ranks; use animate_schedule for more")
    history = chunk_history(schedule)
    panels = len(history)
    columns = min(columns, panels)
    rows = -(-panels // columns)
    w, h = _panel_size(schedule)
    fig, axes = plt.subplots(rows, columns, figsize=(w * columns, h * rows + 0.6), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i < panels:
            draw_state(schedule, i, ax=ax, labels=history[i])
            if i % columns:
                ax.set_yticks([])
        else:
            ax.axis("off")
    fig.suptitle(title or _caption(schedule), fontsize=10)
    fig.tight_layout()
    return fig


def _caption(schedule: Schedule) -> str:
    return (
        f"{schedule.name}, {schedule.world_size} ranks, {schedule.num_chunks} chunks\n"
        f"(arrows: the step's transfers; red adds, green copies)"
    )


def animate_schedule(schedule: Schedule, interval_ms: int = 900) -> ipywidgets.VBox:
    """A play button and a slider over the steps of ``schedule``, above a picture of that step.

    The picture follows the slider while it is dragged; the play button steps
    through the schedule on its own, one step every ``interval_ms``
    milliseconds (for a class, on a projector). Returns an ipywidgets VBox.
    """
    import io

    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    history = chunk_history(schedule) if schedule.world_size <= _LABEL_MAX_RANKS else None
    last = len(schedule)
    play = widgets.Play(
        value=0,
        min=0,
        max=last,
        step=1,
        interval=interval_ms,
        description=_("play"),
        tooltip=_("play the steps"),
    )
    slider = widgets.IntSlider(
        value=0, min=0, max=last, description=_("step"), continuous_update=True
    )  # live while dragging
    widgets.link((play, "value"), (slider, "value"))  # kernel-side, so the picture follows
    picture = widgets.Image(format="png")

    def show(step: int) -> None:
        fig, ax = plt.subplots(figsize=_panel_size(schedule))
        draw_state(schedule, step, ax=ax, labels=None if history is None else history[step])
        # The caption goes above the step title (a suptitle would overlap it).
        ax.set_title(f"{_caption(schedule)}\n{ax.get_title()}", fontsize=8)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        picture.value = png.getvalue()
        picture.width = str(int.from_bytes(picture.value[16:20], "big"))  # natural size

    slider.observe(lambda change: show(change["new"]), names="value")
    show(0)
    return widgets.VBox([widgets.HBox([play, slider]), picture])
