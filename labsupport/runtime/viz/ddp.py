"""Pictures of the step-time model: one step's predicted timeline, a slider over bucket size.

:func:`plot_predicted_step` draws what :func:`labsupport.ddp.predict_step` computes:
the compute row (forward, backward, optimizer) and the link row (each bucket's
all-reduce, from when it may start to when it ends). :func:`plot_bucket_choice` puts
beside it the model's step time for every cap, the chosen one marked (the U: small
caps pay α per bucket, large ones leave late). :func:`bucket_slider` puts that
behind an ipywidgets slider over ``bucket_cap_mb``: drag it and the picture is redrawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt

from labsupport.ddp.predict import StepModel, bucket_timeline, predict_step

COLOURS = {
    "forward": "tab:blue",
    "backward": "tab:orange",
    "optimizer": "tab:green",
    "all_reduce": "tab:red",
}


def plot_predicted_step(
    bucket_bytes: Sequence[int], m: StepModel, ax: plt.Axes | None = None, title: str = ""
) -> plt.Axes:
    """The model's timeline of one step (ms): compute on one row, the buckets on the link below."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 2.2))
    timeline = bucket_timeline(bucket_bytes, m)
    step = predict_step(bucket_bytes, m)
    ms = 1e3
    start_opt = step - m.optimizer
    compute = [
        ("forward", 0.0, m.forward),
        ("backward", m.forward, m.backward),
        ("optimizer", start_opt, m.optimizer),
    ]
    for name, t0, dt in compute:
        ax.broken_barh([(t0 * ms, dt * ms)], (1.1, 0.8), facecolors=COLOURS[name], label=name)
    for k, (_, start, end) in enumerate(timeline):
        label = "all_reduce" if k == 0 else None
        ax.broken_barh(
            [(start * ms, (end - start) * ms)],
            (0.1, 0.8),
            edgecolor="white",
            facecolors=COLOURS["all_reduce"],
            label=label,
        )
    ax.axvline(step * ms, color="k", lw=1)
    ax.set_yticks([0.5, 1.5], ["link", "compute"])
    ax.set_xlabel("ms from the step's start")
    ax.set_xlim(0, step * ms * 1.02)
    ax.legend(loc="upper left", fontsize=7, ncol=4, bbox_to_anchor=(0, -0.45))
    buckets = f"{len(timeline)} bucket" + ("s" if len(timeline) != 1 else "")
    ax.set_title(title or f"{buckets}: step {step * ms:.1f} ms (model)", fontsize=9)
    return ax


def plot_bucket_choice(
    sizes_for: Callable[[float], Sequence[int]],
    caps: Sequence[float],
    m: StepModel,
    cap: float,
    title: str = "",
) -> plt.Figure:
    """The predicted timeline at ``cap`` (left), the step against every cap (right), ``cap`` marked.

    ``sizes_for(cap)``: the bucket sizes in bytes for that cap; ``caps`` in MiB.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 2.8), width_ratios=[3, 1])
    plot_predicted_step(sizes_for(cap), m, ax=left, title=title)
    ms = [predict_step(sizes_for(c), m) * 1e3 for c in caps]
    right.plot([c * 1024 for c in caps], ms, color="0.4", lw=1)
    right.plot([cap * 1024], [ms[list(caps).index(cap)]], "o", color="tab:red")
    right.set_xscale("log", base=2)
    right.set_ylim(0, max(ms) * 1.1)
    right.set_xlabel("bucket_cap_mb (KiB)")
    right.set_ylabel("step (ms)")
    right.set_title("the model, every cap", fontsize=9)
    fig.tight_layout()
    return fig


def bucket_slider(
    sizes_for: Callable[[float], Sequence[int]],
    caps: Sequence[float],
    m: StepModel,
    value: float | None = None,
) -> Any:
    """A slider over ``caps`` (MiB) above :func:`plot_bucket_choice` at the chosen cap.

    ``sizes_for(cap)``: the bucket sizes in bytes for that cap (e.g.
    ``lambda cap: ddp.bucket_sizes(model, cap)``). Returns an ipywidgets VBox.
    """
    import io

    import ipywidgets as widgets

    labels = [(f"{cap * 1024:g} KiB" if cap < 1 else f"{cap:g} MiB", cap) for cap in caps]
    slider = widgets.SelectionSlider(
        options=labels,
        value=value if value in caps else caps[0],
        description="bucket_cap_mb",
        continuous_update=True,
        style={"description_width": "initial"},
        layout=widgets.Layout(width="60%"),
    )
    picture = widgets.Image(format="png")

    def show(cap: float) -> None:
        fig = plot_bucket_choice(sizes_for, caps, m, cap)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        picture.value = png.getvalue()

    slider.observe(lambda change: show(change["new"]), names="value")
    show(slider.value)
    return widgets.VBox([slider, picture])
