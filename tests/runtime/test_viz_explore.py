"""labsupport.runtime.viz.explore: notebook 04's cost curves, winner map and their sliders."""

from __future__ import annotations

import base64
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from labsupport import costmodel
from labsupport.runtime.viz import explore

ALGOS = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "recursive_doubling": costmodel.recursive_doubling_all_reduce_time,
    "rabenseifner": costmodel.rabenseifner_all_reduce_time,
}
ALPHA, BETA = 1e-3, 20e-9  # the slow-ethernet preset: 1 ms, 50 MB/s


def teardown_function() -> None:
    plt.close("all")


def test_winner_is_the_fastest_closed_form() -> None:
    name, seconds = explore.winner(ALGOS, 4096, 4, ALPHA, BETA)
    assert name == "recursive_doubling"
    assert seconds == min(f(4096, 4, ALPHA, BETA) for f in ALGOS.values())


def test_ring_wins_large_messages_when_p_is_not_a_power_of_two() -> None:
    # the folded Rabenseifner pays two whole-buffer steps: 4.70 s against the ring's 2.25 s
    assert explore.winner(ALGOS, 64 << 20, 6, ALPHA, BETA)[0] == "ring"
    assert explore.winner(ALGOS, 64 << 20, 8, ALPHA, BETA)[0] == "rabenseifner"


def test_crossover_size_is_where_the_costs_meet_and_scales_with_alpha_over_beta() -> None:
    ring, rd = ALGOS["ring"], ALGOS["recursive_doubling"]
    n = explore.crossover_size(rd, ring, 4, ALPHA, BETA)
    assert n == pytest.approx(8 * ALPHA / BETA)  # 6α + 1.5nβ = 2α + 2nβ
    assert ring(n, 4, ALPHA, BETA) == pytest.approx(rd(n, 4, ALPHA, BETA))
    assert explore.crossover_size(rd, ring, 4, 10 * ALPHA, BETA) == pytest.approx(10 * n)
    assert explore.crossover_size(rd, ring, 4, ALPHA, 10 * BETA) == pytest.approx(n / 10)


def test_crossover_size_is_infinite_when_the_lines_never_meet() -> None:
    ring = ALGOS["ring"]
    assert explore.crossover_size(ring, ring, 4, ALPHA, BETA) == math.inf
    # the tree is above recursive doubling at every size: they meet only at n < 0
    tree, rd = ALGOS["tree"], ALGOS["recursive_doubling"]
    assert explore.crossover_size(rd, tree, 4, ALPHA, BETA) == math.inf


def test_cost_curves_marks_the_size_and_names_its_winner() -> None:
    ax = explore.cost_curves(ALGOS, alpha=ALPHA, beta=BETA, p=4, size=1 << 20)
    labels = [line.get_label() for line in ax.get_lines()]
    assert "ring (model)" in labels
    assert any(label.startswith("at 1 MiB: rabenseifner fastest") for label in labels)
    assert "1 ms" in ax.get_title() and "50 MB/s" in ax.get_title()


def test_winner_map_circles_the_marked_cell() -> None:
    ax = explore.winner_map(ALGOS, alpha=ALPHA, beta=BETA, mark=(6, 64 << 20))
    assert "p = 6, 64 MiB: ring" in ax.get_title()
    assert explore.MAP_RANKS[2] == 6  # 6, 12 and 24 are on the map


def test_measured_vs_model_gives_ratio_and_excess_per_step() -> None:
    measured = {"ring": ([4096, 1 << 20], [0.0062, 0.0375])}
    t = explore.measured_vs_model(
        measured, lambda name, n: ALGOS[name](n, 4, ALPHA, BETA), lambda name: 6
    )
    assert t.columns[-2:] == ["measured / model", "extra per step"]
    first = dict(zip(t.columns, t.cells[0], strict=True))
    assert first["size"] == "4 KiB"
    assert first["measured / model"] == f"{0.0062 / ALGOS['ring'](4096, 4, ALPHA, BETA):.2f}"
    assert first["extra per step"].endswith("µs")


def test_explore_redraws_when_a_slider_moves_and_shows_a_png_without_a_kernel() -> None:
    pytest.importorskip("ipywidgets")
    widget = explore.explore(ALGOS, alpha=ALPHA, beta=BETA, p=4, size=1 << 20)
    latency, picture = widget.sliders[0], widget.picture
    first_row = widget.children[0]  # the first slider is what the browser test drags:
    assert first_row.children[0].children == (latency,)  # its parent holds it alone
    assert latency.value == pytest.approx(ALPHA)
    first = picture.value
    latency.value = explore.LATENCIES[0]
    assert picture.value != first
    latency.value = ALPHA
    assert picture.value == first  # the same view again, byte for byte

    bundle = widget._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]) == first
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("explore: α = 1 ms, 50 MB/s, p = 4, 1 MiB")
