"""JupyterLab as a learner uses it: Run All on 00, the stop button, notebook 03's slider."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import nbformat
import pytest
from conftest import still_running
from playwright.sync_api import Locator, Page, expect

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from conftest import Lab

    Step = Callable[[str], None]

#: How long the worst step may take on a busy 2-core machine.
RUN_ALL_S = 150
KERNEL_START_S = 60


@pytest.fixture(autouse=True)
def fresh_kernels(lab: Lab) -> Iterator[None]:
    """Each test starts its own kernel; the kernels end with it, and their ranks too."""
    yield
    workers = lab.workers()
    lab.shutdown_kernels()
    left = still_running(workers, 15)
    assert not left, f"worker processes left after their kernel shut down: {left}"


def open_notebook(page: Page, lab: Lab, name: str) -> Locator:
    """Open ``name`` in JupyterLab and wait until its kernel is idle; return the notebook."""
    page.goto(lab.open_url(name))
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    expect(notebook.locator(".jp-CodeCell").first).to_be_attached(timeout=KERNEL_START_S * 1000)
    # The course's kernel, started and idle (the status bar says both).
    expect(page.locator(".jp-StatusBar-Widget")).to_contain_text(
        "Collective communication course | Idle", timeout=KERNEL_START_S * 1000
    )
    return notebook


def wait_idle(page: Page, timeout_s: float) -> None:
    """Wait until the notebook's kernel is idle (the status bar and the toolbar agree)."""
    expect(page.locator(".jp-StatusBar-Widget")).to_contain_text("| Idle", timeout=timeout_s * 1000)
    indicator = page.locator(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator"
    )
    expect(indicator).to_have_attribute("data-status", "idle", timeout=timeout_s * 1000)


def code_cells(notebook: Locator) -> Locator:
    return notebook.locator(".jp-CodeCell")


def cell_with(notebook: Locator, text: str) -> Locator:
    """The code cell whose source contains ``text`` (exactly one)."""
    cells = code_cells(notebook).filter(
        has=notebook.page.locator(".jp-InputArea-editor", has_text=text)
    )
    expect(cells).to_have_count(1)
    return cells.first


def prompt(cell: Locator) -> str:
    return (cell.locator(".jp-InputArea-prompt").text_content() or "").strip()


def outputs(cell: Locator) -> str:
    """The text of a cell's outputs (text_content: cells off screen are not laid out)."""
    return "\n".join(cell.locator(".jp-OutputArea-output").all_text_contents())


def menu(page: Page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def run_cell(cell: Locator) -> None:
    """Click into a cell and run it with Shift+Enter, as a learner does."""
    cell.locator(".jp-InputArea-editor").click()
    cell.page.keyboard.press("Shift+Enter")


def test_notebook_00_run_all(page: Page, lab: Lab, step: Step) -> None:
    notebook = open_notebook(page, lab, "00_welcome.ipynb")
    step("opened")
    cells = code_cells(notebook)
    count = cells.count()
    assert count >= 8, f"notebook 00 shows {count} code cells"

    menu(page, "Run", "Run All Cells")
    last = cell_with(notebook, "%ranks shutdown")
    expect(last.locator(".jp-OutputArea-output")).to_contain_text(
        "cluster shut down", timeout=RUN_ALL_S * 1000
    )
    wait_idle(page, 10)
    step("ran-all")

    # Every code cell ran (a prompt like "[7]:", not "[ ]:" or "[*]:").
    prompts = [prompt(cells.nth(i)) for i in range(count)]
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts

    # Per-rank output, grouped and in rank order.
    hello = outputs(cell_with(notebook, "hello from rank"))
    lines = [ln for ln in hello.splitlines() if ln.startswith("[rank ")]
    ranks = [int(re.match(r"\[rank (\d+)\]", ln).group(1)) for ln in lines]
    assert ranks == sorted(ranks) and sorted(set(ranks)) == [0, 1, 2, 3], hello
    for r in range(4):
        assert f"[rank {r}] hello from rank {r} of 4 (local rank {r})" in hello, hello
    summed = outputs(cell_with(notebook, "dist.all_reduce(x)"))
    assert [ln for ln in summed.splitlines() if ln.startswith("[rank")] == [
        f"[rank {r}] [60, 64, 68]" for r in range(4)
    ], summed

    # The deliberate error: its message and the ranks' own lines, no launcher frames.
    failing = cell_with(notebook, "fails on purpose")
    failing.scroll_into_view_if_needed()
    step("the-error")
    error = outputs(failing)
    assert "RankError" in error and "ValueError: rank 1 fails on purpose" in error, error
    assert "still blocked here" in error and "dist.barrier()" in error, error
    launcher_frames = [ln for ln in error.splitlines() if "labsupport/" in ln]
    assert not launcher_frames, f"launcher frames in the error shown to the learner: {error}"
    assert len(error.splitlines()) < 60, f"a wall of text for one error:\n{error}"

    # Nothing else failed: no other cell shows an error or writes to stderr.
    stderr = notebook.locator(
        '.jp-CodeCell:has(.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"])'
    )
    assert stderr.count() == 1, [outputs(stderr.nth(i))[:500] for i in range(stderr.count())]
    assert "still here: False" in outputs(cell_with(notebook, "still here"))


def hang_notebook(lab: Lab) -> str:
    """A notebook whose second cell blocks rank 0 in a recv that nobody sends to."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "collective-course",
        "display_name": "Collective communication course",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext labsupport"),
        nbformat.v4.new_code_cell(
            "%%ranks -n 2\n"
            "t = torch.zeros(1)\n"
            "if rank == 0:\n"
            "    dist.recv(t, src=1)  # rank 1 never sends: this waits forever\n"
        ),
        nbformat.v4.new_code_cell('%%ranks -n 2\nimport os\nprint("alive", rank, os.getpid())'),
        nbformat.v4.new_code_cell("%ranks shutdown"),
    ]
    nbformat.write(nb, lab.root / "hang.ipynb")
    return "hang.ipynb"


def test_stop_button_ends_a_hang(page: Page, lab: Lab, step: Step) -> None:
    notebook = open_notebook(page, lab, hang_notebook(lab))
    run_cell(cell_with(notebook, "%load_ext"))
    hang = cell_with(notebook, "waits forever")
    run_cell(hang)
    expect(hang.locator(".jp-OutputArea-output")).to_contain_text(
        "started 2 gloo ranks", timeout=90_000
    )
    time.sleep(2.0)  # rank 1 is done, rank 0 waits in recv
    step("hanging")
    assert prompt(hang) == "[*]:", "the hanging cell is not running"
    before = sorted(lab.workers(), key=lambda p: p.create_time())
    assert len(before) >= 2, f"expected the 2 ranks' processes, found {before}"
    running = before[:2]  # the group started first; later ones are the spare group

    interrupt = '.jp-Toolbar [data-command="notebook:interrupt-kernel"]'
    page.locator(f".jp-NotebookPanel:not(.lm-mod-hidden) {interrupt}").click()
    pressed = time.monotonic()
    wait_idle(page, 15)
    took = time.monotonic() - pressed
    step("stopped")
    assert took < 8, f"the kernel was busy for {took:.1f} s after the stop button"
    message = outputs(hang)
    assert "interrupted" in message, message
    assert "labsupport/" not in message, f"launcher frames shown:\n{message}"

    # The stuck rank is not left behind: the group that ran the cell either
    # answers the next cell, or was replaced and its processes are gone.
    alive = cell_with(notebook, '"alive"')
    run_cell(alive)
    expect(alive.locator(".jp-OutputArea-output")).to_contain_text("alive 1", timeout=90_000)
    wait_idle(page, 15)
    step("next-cell")
    answering = {int(m) for m in re.findall(r"alive \d+ (\d+)", outputs(alive))}
    assert len(answering) == 2, outputs(alive)
    stuck = still_running([p for p in running if p.pid not in answering], 10)
    assert not stuck, f"ranks left running after the stop: {[p.cmdline() for p in stuck]}"

    # And %ranks shutdown leaves no worker process at all (the spare group included).
    run_cell(cell_with(notebook, "%ranks shutdown"))
    wait_idle(page, 30)
    left = still_running(lab.workers(), 10)
    assert not left, f"worker processes left after %ranks shutdown: {[p.pid for p in left]}"


def test_notebook_03_slider_changes_the_picture(page: Page, lab: Lab, step: Step) -> None:
    notebook = open_notebook(page, lab, "03_ring_allreduce.ipynb")
    # The cells the slider needs: the imports, the ring's schedule, the widget.
    for source in ("from labsupport.viz.schedule import", "ring = ring_all_reduce(4)"):
        cell = cell_with(notebook, source)
        run_cell(cell)
        expect(cell.locator(".jp-InputArea-prompt")).to_have_text(
            re.compile(r"\[\d+\]:"), timeout=90_000
        )
    animated = cell_with(notebook, "animate_schedule(ring)")
    run_cell(animated)
    image = animated.locator("img.widget-image")
    expect(image).to_be_visible(timeout=60_000)
    readout = animated.locator(".widget-readout")
    expect(readout).to_have_text("0")
    wait_idle(page, 30)
    first = image.screenshot()
    step("slider-at-0")

    # Drag the slider's handle to the middle of its track, as with a mouse.
    drag_slider(animated, 0.5)
    expect(readout).not_to_have_text("0", timeout=10_000)
    position = readout.text_content()
    moved = settled(page, image)
    step("slider-moved")
    assert moved != first, f"the picture stayed the same when the slider moved to step {position}"

    # And back to the start: the picture of step 0 again, exactly.
    drag_slider(animated, 0.0)
    expect(readout).to_have_text("0", timeout=10_000)
    back = settled(page, image)
    step("slider-back")
    assert back == first, "the picture did not go back to step 0 with the slider"


def drag_slider(widget: Locator, fraction: float) -> None:
    """Drag an ipywidgets slider's handle to ``fraction`` of its track with the mouse."""
    track = widget.locator(".widget-slider .noUi-target").bounding_box()
    handle = widget.locator(".widget-slider .noUi-handle").bounding_box()
    assert track and handle, "the slider is not on screen"
    mouse = widget.page.mouse
    mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    mouse.down()
    mouse.move(track["x"] + fraction * track["width"], track["y"] + track["height"] / 2, steps=8)
    mouse.up()


def settled(page: Page, image: Locator, timeout_s: float = 30) -> bytes:
    """The picture once the kernel has drawn every step the slider passed through."""
    deadline = time.monotonic() + timeout_s
    last = image.screenshot()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        wait_idle(page, timeout_s)
        now = image.screenshot()
        if now == last:
            return now
        last = now
    raise AssertionError(f"the picture kept changing for {timeout_s:g} s")
