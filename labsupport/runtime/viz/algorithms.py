"""Pictures for notebook 04: cost curves (modelled lines, measured points) and a winner map."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

#: One colour per algorithm, the same in every picture.
COLORS = {
    "ring": "tab:blue",
    "tree": "tab:green",
    "recursive_doubling": "tab:orange",
    "rabenseifner": "tab:red",
    "hierarchical": "tab:purple",
    "direct": "tab:brown",
    "double_binary_tree": "tab:olive",
    "hierarchical_ring": "tab:pink",
    "hierarchical_hd": "tab:gray",
}


def _size_label(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:g} B"


def _size_ticks(ax: plt.Axes, sizes: Sequence[float]) -> None:
    """Powers of two as x ticks (about six), labelled in B, KiB, MiB, GiB."""
    lo, hi = math.ceil(math.log2(min(sizes))), math.floor(math.log2(max(sizes)))
    step = max(1, math.ceil((hi - lo + 1) / 6))
    ticks = [2.0**e for e in range(lo, hi + 1, step)]
    ax.set_xticks(ticks, [_size_label(t) for t in ticks])
    ax.minorticks_off()


def plot_costs(
    sizes: Sequence[float],
    model: Mapping[str, Sequence[float]],
    measured: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    *,
    title: str = "",
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Time against message size, log-log: one line per algorithm, measured points on top.

    ``model`` maps an algorithm to its modelled times (s) at ``sizes`` (bytes);
    ``measured`` maps it to (sizes, times) that were measured.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2))
    for name, times in model.items():
        ax.loglog(sizes, np.asarray(times) * 1e3, color=COLORS.get(name), label=f"{name} (model)")
    for name, (xs, ts) in (measured or {}).items():
        ax.loglog(xs, np.asarray(ts) * 1e3, "o", color=COLORS.get(name), label=f"{name} (measured)")
    _size_ticks(ax, sizes)
    ax.set_xlabel("message size")
    ax.set_ylabel("time (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def plot_winner_map(
    ranks: Sequence[int],
    sizes: Sequence[float],
    times: Mapping[str, np.ndarray],
    *,
    title: str = "",
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Which algorithm is fastest at each (ranks, size); times[name][i, j]: ranks[i], sizes[j]."""
    names = list(times)
    best = np.argmin(np.stack([times[n] for n in names]), axis=0)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap([COLORS.get(n, "gray") for n in names])
    ax.pcolormesh(
        np.arange(len(sizes) + 1),
        np.arange(len(ranks) + 1),
        best,
        cmap=cmap,
        vmin=-0.5,
        vmax=len(names) - 0.5,
    )
    xt = range(0, len(sizes), max(1, len(sizes) // 8))
    ax.set_xticks([i + 0.5 for i in xt], [_size_label(sizes[i]) for i in xt], rotation=45)
    ax.set_yticks([i + 0.5 for i in range(len(ranks))], [str(p) for p in ranks])
    ax.set_xlabel("message size")
    ax.set_ylabel("ranks p")
    ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS.get(n, "gray")) for n in names]
    ax.legend(handles, names, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax
