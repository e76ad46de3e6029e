"""Schedule pictures: one panel per step, labels that say which inputs a chunk holds."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from labsupport import schedules as sch
from labsupport.runtime.viz import schedule as vs


def _texts(ax):
    """The cell labels (arrows are Annotations, also texts, with no text)."""
    return [t.get_text() for t in ax.texts if type(t).__name__ != "Annotation"]


def _arrows(ax):
    return [t for t in ax.texts if type(t).__name__ == "Annotation"]


def test_plot_schedule_has_a_panel_per_step_and_ends_with_full_sums():
    s = sch.ring_all_reduce(4)
    fig = vs.plot_schedule(s)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == len(s) + 1
    assert _texts(panels[0]) == [str(r) for r in range(4) for _ in range(4)]
    assert _texts(panels[-1]) == ["Σ"] * 16
    assert panels[-1].get_title() == "done"
    # Step 0 of a 4-rank ring: four arrows, one per rank; none once done.
    assert len(_arrows(panels[0])) == 4 and _arrows(panels[-1]) == []
    plt.close(fig)


def test_labels_name_the_inputs_a_chunk_holds():
    ax = vs.draw_state(sch.ring_all_reduce(4), 2)
    assert "0+2+3" in _texts(ax)  # chunk 0 on rank 0 after two reduce-scatter steps
    plt.close(ax.figure)


def test_broadcast_cells_are_empty_until_data_arrives():
    ax = vs.draw_state(sch.binomial_broadcast(4, root=1), 0)
    assert _texts(ax) == ["", "1", "", ""]
    plt.close(ax.figure)


def test_state_at_checks_the_step():
    s = sch.ring_all_gather(3)
    assert vs.state_at(s, len(s)).tolist() == [[1] * 3] * 3
    with pytest.raises(ValueError, match="between 0 and 2"):
        vs.state_at(s, 3)


def test_animation_slider_covers_every_step_and_redraws():
    pytest.importorskip("ipywidgets")
    s = sch.recursive_doubling_all_reduce(8)
    box = vs.animate_schedule(s)
    controls, picture = box.children
    play, slider = controls.children
    assert (slider.min, slider.max) == (0, len(s)) and (play.min, play.max) == (0, len(s))
    assert slider.continuous_update  # the picture follows while the slider is dragged
    first = bytes(picture.value)
    assert first.startswith(b"\x89PNG")
    slider.value = len(s)  # moving the slider redraws the picture
    assert bytes(picture.value).startswith(b"\x89PNG") and bytes(picture.value) != first
    play.value = 1  # the play button moves the slider, which redraws the picture
    assert slider.value == 1 and bytes(picture.value) not in (first, b"")


def test_big_rings_draw_without_labels():
    s = sch.ring_all_reduce(300)
    ax = vs.draw_state(s, len(s) // 2)
    assert _texts(ax) == [] and _arrows(ax) == [] and ax.images[0].get_array().shape[0] <= 256
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="up to 16 ranks"):
        vs.plot_schedule(s)
