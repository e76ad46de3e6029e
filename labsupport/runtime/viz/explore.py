"""Notebook 04's pictures with knobs: cost curves and the winner map, and sliders to turn.

::

    from labsupport import costmodel
    from labsupport.runtime.viz import explore
    algos = {"ring": costmodel.ring_all_reduce_time, "tree": costmodel.tree_all_reduce_time}
    explore.cost_curves(algos, alpha=1e-3, beta=20e-9, p=4, size=1 << 20)   # one picture
    explore.winner_map(algos, alpha=1e-3, beta=20e-9, mark=(6, 64 << 20))   # who wins where
    explore.explore(algos, alpha=1e-3, beta=20e-9)    # both, with sliders (ipywidgets)
    explore.measured_vs_model(measured, model)        # a table: measured, model, ratio
    explore.crossover_size(algos["ring"], algos["tree"], 4, 1e-3, 20e-9)   # bytes

The static functions are what a deck or a script calls; :func:`explore` draws the
same two pictures from four sliders (latency α, bandwidth 1/β, ranks p, a message
size) and redraws them when a slider moves. Stored in a notebook, the widget carries
a PNG of its first view, so a reader with no kernel still sees the pictures.
An algorithm is a closed form ``f(n, p, alpha, beta)`` of :mod:`labsupport.costmodel`.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from labsupport.runtime.language import _
from labsupport.runtime.viz.algorithms import plot_costs, plot_winner_map
from labsupport.runtime.viz.table import Table, table
from labsupport.units import format_rate, format_size, format_time

ClosedForm = Callable[..., float]

#: Sizes the cost curves span by default: 1 KiB .. 64 MiB.
CURVE_SIZES = np.logspace(10, 26, 33, base=2)
#: Sizes of the winner map: 8 B .. 1 GiB.
MAP_SIZES = np.logspace(3, 30, 28, base=2)
#: World sizes of the winner map: powers of two, and 6, 12, 24 (folded algorithms).
MAP_RANKS = (2, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024)

#: The sliders' positions: latency (s), bandwidth (B/s), ranks, message size (B).
LATENCIES = (1e-6, 10e-6, 100e-6, 1e-3, 10e-3, 100e-3)
BANDWIDTHS = (5e6, 50e6, 500e6, 5e9, 50e9)
SIZES = tuple(1 << e for e in range(10, 27, 2))  # 1 KiB .. 64 MiB


def winner(
    algorithms: Mapping[str, ClosedForm], n: float, p: int, alpha: float, beta: float
) -> tuple[str, float]:
    """(name, seconds) of the fastest algorithm for an ``n``-byte all-reduce on ``p`` ranks."""
    times = {name: float(f(n, p, alpha, beta)) for name, f in algorithms.items()}
    best = min(times, key=times.__getitem__)
    return best, times[best]


def crossover_size(f: ClosedForm, g: ClosedForm, p: int, alpha: float, beta: float) -> float:
    """The message size (bytes) at which closed forms ``f`` and ``g`` cost the same on p ranks.

    Both costs are ``a + b·n``, so the crossover is ``(a_g - a_f) / (b_f - b_g)``;
    ``inf`` if they never cross at a positive size.
    """
    a_f, a_g = f(0, p, alpha, beta), g(0, p, alpha, beta)
    b_f, b_g = f(1, p, alpha, beta) - a_f, g(1, p, alpha, beta) - a_g
    if b_f == b_g:
        return float("inf")
    n = (a_g - a_f) / (b_f - b_g)
    return float(n) if n > 0 else float("inf")


def cost_curves(
    algorithms: Mapping[str, ClosedForm],
    *,
    alpha: float,
    beta: float,
    p: int,
    size: float | None = None,
    sizes: Sequence[float] = CURVE_SIZES,
    measured: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    title: str | None = None,
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Each algorithm's modelled time against message size on ``p`` ranks (log-log).

    ``size``: a message size to mark with a dashed vertical line; its legend entry
    names the fastest algorithm there and its time. ``measured``: points to draw
    over the lines, {name: (sizes, seconds)}.
    """
    model = {name: [f(n, p, alpha, beta) for n in sizes] for name, f in algorithms.items()}
    if title is None:
        title = f"all-reduce on {p} ranks, α = {format_time(alpha)}, {format_rate(1 / beta)}"
    ax = plot_costs(sizes, model, measured, title=title, ax=ax)
    if size is not None:
        name, seconds = winner(algorithms, size, p, alpha, beta)
        label = f"at {format_size(size)}: {name} fastest, {format_time(seconds)}"
        ax.axvline(size, color="black", linestyle="--", linewidth=1, label=label)
        ax.legend(fontsize=8)
    return ax


def winner_grid(
    algorithms: Mapping[str, ClosedForm],
    *,
    alpha: float,
    beta: float,
    ranks: Sequence[int] = MAP_RANKS,
    sizes: Sequence[float] = MAP_SIZES,
) -> dict[str, np.ndarray]:
    """{name: times[i, j]}: each algorithm's modelled time on ranks[i] for sizes[j]."""
    return {
        name: np.array([[f(n, q, alpha, beta) for n in sizes] for q in ranks])
        for name, f in algorithms.items()
    }


def winner_map(
    algorithms: Mapping[str, ClosedForm],
    *,
    alpha: float,
    beta: float,
    ranks: Sequence[int] = MAP_RANKS,
    sizes: Sequence[float] = MAP_SIZES,
    mark: tuple[int, float] | None = None,
    title: str | None = None,
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Which algorithm is fastest at each (ranks, size), one colour per algorithm.

    ``mark=(p, size)`` circles the cell nearest to that point and names its winner.
    """
    grid = winner_grid(algorithms, alpha=alpha, beta=beta, ranks=ranks, sizes=sizes)
    if title is None:
        title = f"fastest all-reduce (α = {format_time(alpha)}, {format_rate(1 / beta)})"
    ax = plot_winner_map(ranks, sizes, grid, title=title, ax=ax)
    if mark is not None:
        p, size = mark
        i = int(np.argmin([abs(np.log2(q) - np.log2(p)) for q in ranks]))
        j = int(np.argmin(np.abs(np.log2(sizes) - np.log2(size))))
        name, seconds = winner(algorithms, sizes[j], ranks[i], alpha, beta)
        ax.plot(j + 0.5, i + 0.5, "o", markersize=12, markerfacecolor="none",
                markeredgecolor="black", markeredgewidth=2)  # fmt: skip
        ax.set_title(f"{title}\ncircled: p = {ranks[i]}, {format_size(sizes[j])}: "
                     f"{name}, {format_time(seconds)}", fontsize=10)  # fmt: skip
    return ax


def both(
    algorithms: Mapping[str, ClosedForm],
    *,
    alpha: float,
    beta: float,
    p: int,
    size: float,
    ranks: Sequence[int] = MAP_RANKS,
) -> plt.Figure:
    """The cost curves on ``p`` ranks beside the winner map, ``size`` marked on both."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.2))
    cost_curves(algorithms, alpha=alpha, beta=beta, p=p, size=size, ax=left)
    winner_map(algorithms, alpha=alpha, beta=beta, ranks=ranks, mark=(p, size), ax=right)
    fig.tight_layout()
    return fig


def _png(fig: plt.Figure) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=80)
    plt.close(fig)
    return out.getvalue()


def _nearest(options: Sequence[float], value: float) -> float:
    return min(options, key=lambda o: abs(np.log(o) - np.log(value)))


def explore(
    algorithms: Mapping[str, ClosedForm],
    *,
    alpha: float,
    beta: float,
    p: int = 4,
    size: int = 1 << 20,
    ranks: Sequence[int] = MAP_RANKS,
) -> Any:  # an Explorer (an ipywidgets VBox)
    """Sliders for latency α, bandwidth 1/β, ranks p and a message size, over :func:`both`.

    Moving a slider redraws both pictures (when it is let go); the widget's
    ``sliders`` are latency, bandwidth, ranks and size, its ``picture`` the image.
    Each slider moves
    through a few round values (``LATENCIES``, ``BANDWIDTHS``, ``ranks``, ``SIZES``);
    the starting values are the nearest of those to the arguments.
    """
    import ipywidgets as widgets

    class Explorer(widgets.VBox):
        """The widget; shown with no kernel (a stored notebook), it is a PNG of its view."""

        def _repr_mimebundle_(self, **kwargs: Any) -> dict:
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            bundle["image/png"] = base64.b64encode(picture.value).decode()
            bundle["text/plain"] = _("explore: {state} (sliders need a running kernel)").format(
                state=describe()
            )
            return bundle

    def slider(label: str, options: Sequence[Any], value: Any, fmt: Callable) -> Any:
        return widgets.SelectionSlider(
            options=[(fmt(o), o) for o in options], value=value, description=label,
            continuous_update=False, layout=widgets.Layout(width="360px"),
        )  # fmt: skip

    latency = slider(_("latency α"), LATENCIES, _nearest(LATENCIES, alpha), format_time)
    bandwidth = slider(_("bandwidth"), BANDWIDTHS, _nearest(BANDWIDTHS, 1 / beta), format_rate)
    world = slider(_("ranks p"), list(ranks), min(ranks, key=lambda q: abs(q - p)), str)
    message = slider(_("size"), SIZES, _nearest(SIZES, size), format_size)
    picture = widgets.Image(format="png")

    def describe() -> str:
        return (f"α = {format_time(latency.value)}, {format_rate(bandwidth.value)}, "
                f"p = {world.value}, {format_size(message.value)}")  # fmt: skip

    def draw(_: Any = None) -> None:
        fig = both(algorithms, alpha=latency.value, beta=1 / bandwidth.value, p=world.value,
                   size=message.value, ranks=ranks)  # fmt: skip
        picture.value = _png(fig)

    for s in (latency, bandwidth, world, message):
        s.observe(draw, names="value")
    draw()
    # Each slider in a box of its own: a slider's parent holds that slider only.
    rows = [widgets.HBox([widgets.Box([s]) for s in pair])
            for pair in ((latency, bandwidth), (world, message))]  # fmt: skip
    explorer = Explorer([*rows, picture])
    explorer.sliders, explorer.picture = [latency, bandwidth, world, message], picture
    return explorer


def measured_vs_model(
    measured: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    model: Callable[[str, float], float],
    steps: Callable[[str], int] | None = None,
) -> Table:
    """Measured time, modelled time and their ratio, for every algorithm and size.

    ``measured``: {name: (sizes, seconds)}; ``model(name, size)``: the modelled
    seconds. With ``steps(name)`` (the algorithm's number of steps), a last column
    gives what the measurement adds per step: (measured - model) / steps.
    """
    rows = []
    for name, (sizes, seconds) in measured.items():
        for size, t in zip(sizes, seconds, strict=True):
            m = model(name, size)
            row = {"algorithm": name, "size": size, "measured": t, "model": m,
                   "measured / model": t / m}  # fmt: skip
            if steps is not None:
                row["extra per step"] = (t - m) / steps(name)
            rows.append(row)
    formats = {"size": format_size, "measured": format_time, "model": format_time,
               "measured / model": ".2f"}  # fmt: skip
    if steps is not None:
        formats["extra per step"] = format_time
    return table(rows, formats=formats)
