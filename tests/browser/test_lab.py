"""JupyterLab as a learner uses it: Run All on 00 and 04, the stop button, the sliders of 03
and 04, links to REFERENCES.md, and how wide a line of text output can be."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import nbformat
import pytest
from conftest import REPO, still_running
from playwright.sync_api import Locator, Page, expect

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from conftest import Lab

    Step = Callable[[str], None]

#: How long the worst step may take on a busy 2-core machine.
RUN_ALL_S = 150
KERNEL_START_S = 60
#: Notebook 04 runs emulated networks: more cells, more time than 00.
RUN_ALL_04_S = 400


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
    for source in ("from labsupport.runtime.viz.schedule import", "ring = ring_all_reduce(4)"):
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


def test_make_lab_opens_on_the_notebooks_and_their_links_to_references_open(
    page: Page, lab: Lab, step: Step
) -> None:
    """JupyterLab serves the repository and starts in notebooks/ (the Makefile's LAB_ARGS),
    so a notebook's link to ../REFERENCES.md opens instead of failing at the root."""
    page.goto(f"{lab.url}/?token={lab.token}")  # what the browser `make lab` opens shows
    expect(page).to_have_url(re.compile(r"/lab/tree/notebooks"), timeout=30_000)
    listing = page.locator(".jp-DirListing-content")
    expect(listing).to_contain_text("00_welcome.ipynb", timeout=30_000)
    step("start-page")

    notebook = open_notebook(page, lab, "00_welcome.ipynb")
    # the notebook's [REFERENCES.md](../REFERENCES.md#course-wide), as JupyterLab renders it
    link = scroll_to(notebook, notebook.locator(".jp-RenderedMarkdown a", has_text="REFERENCES.md"))
    link.click()
    tab = page.locator(".lm-TabBar-tab", has_text="REFERENCES.md")
    expect(tab).to_be_visible(timeout=30_000)
    opened = page.locator(".jp-MainAreaWidget:not(.lm-mod-hidden)").filter(has_text="References")
    expect(opened.first).to_be_visible(timeout=30_000)
    step("references-open")
    errors = page.locator(".jp-Dialog")
    assert errors.count() == 0, errors.first.text_content()


def _stored_output_width() -> int:
    """WIDTH of tests/course/test_stored_outputs.py: the widest text line the check accepts."""
    text = (REPO / "tests" / "course" / "test_stored_outputs.py").read_text()
    match = re.search(r"^WIDTH = (\d+)", text, flags=re.MULTILINE)
    assert match, "tests/course/test_stored_outputs.py sets no WIDTH"
    return int(match.group(1))


def test_a_line_of_the_checked_width_fits_jupyterlab_at_1400_px(browser: object, lab: Lab) -> None:
    """The width test_stored_outputs.py accepts is what JupyterLab 4 shows on one line in
    a 1400x900 window, with the file browser open as on a first start: a line of WIDTH
    characters stays on one line, one more character wraps."""
    width = _stored_output_width()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "collective-course",
        "display_name": "Collective communication course",
        "language": "python",
    }
    for n in (width, width + 1):
        cell = nbformat.v4.new_code_cell(f"print('x' * {n})", execution_count=n)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * n + "\n")]
        nb.cells.append(cell)
    nbformat.write(nb, lab.root / "width.ipynb")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(lab.open_url("width.ipynb"))
        pres = page.locator(".jp-OutputArea-output pre")
        expect(pres).to_have_count(2, timeout=KERNEL_START_S * 1000)
        panel = page.locator("#jp-left-stack").bounding_box()
        assert panel and panel["width"] > 100, "the file browser is not open as on a first start"
        lines = page.evaluate(
            """() => Array.from(document.querySelectorAll('.jp-OutputArea-output pre'))
                .map(pre => { const r = document.createRange(); r.selectNodeContents(pre);
                              return new Set(Array.from(r.getClientRects())
                                  .map(x => Math.round(x.top))).size; })"""
        )
        assert lines == [1, 2], (
            f"a line of {width} characters takes {lines[0]} line(s) and one of {width + 1} "
            f"takes {lines[1]} in JupyterLab at 1400 px: WIDTH in "
            "tests/course/test_stored_outputs.py no longer matches the browser"
        )
    finally:
        context.close()


def test_notebook_04_run_all_then_its_slider_changes_the_picture(
    page: Page, lab: Lab, step: Step
) -> None:
    """Run All on notebook 04 as a learner does, then drag the first ipywidgets slider it
    shows: the picture next to it changes, and comes back when the slider goes back."""
    source = (REPO / "notebooks" / "04_algorithms.ipynb").read_text()
    if not re.search(r"ipywidgets|\binteract|animate_\w+\(", source):
        pytest.skip(
            "notebook 04 has no widget yet (issue 28 item 9: the algorithms issue adds one); "
            "this test drags the first ipywidgets slider it shows once it has one"
        )
    run_all_and_drag_the_first_slider(page, lab, "04_algorithms.ipynb", step)


def run_all_and_drag_the_first_slider(page: Page, lab: Lab, name: str, step: Step) -> None:
    """Run All on ``name``; drag its first slider to the far end and back: the picture
    in the slider's cell changes, then is what it was."""
    notebook = open_notebook(page, lab, name)
    cells = code_cells(notebook)
    count = cells.count()
    menu(page, "Run", "Run All Cells")
    last = cells.nth(count - 1)
    expect(last.locator(".jp-InputArea-prompt")).to_have_text(
        re.compile(r"\[\d+\]:"), timeout=RUN_ALL_04_S * 1000
    )
    wait_idle(page, RUN_ALL_04_S)
    step("ran-all")
    prompts = [prompt(cells.nth(i)) for i in range(count)]
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts

    slider = scroll_to(notebook, notebook.locator(".jp-OutputArea-output .widget-slider"))
    cell = cells.filter(has=page.locator(".jp-OutputArea-output .widget-slider")).first
    picture = cell.locator(
        ".jp-OutputArea-output img, .jp-OutputArea-output canvas, .jp-OutputArea-output svg"
    ).first
    cell.scroll_into_view_if_needed()
    expect(picture).to_be_visible(timeout=60_000)
    first = settled(page, picture)
    step("slider-at-start")

    widget = slider.locator("..")  # drag_slider looks for the slider inside
    start = slider_fraction(slider)
    drag_slider(widget, 1.0 if start < 0.5 else 0.0)  # to the far end
    moved = settled(page, picture)
    step("slider-moved")
    assert moved != first, "the picture stayed the same when the slider moved"
    drag_slider(widget, start)
    back = settled(page, picture)
    step("slider-back")
    assert back == first, "the picture did not come back when the slider went back"


def scroll_to(notebook: Locator, target: Locator, tries: int = 80) -> Locator:
    """The first of ``target``, scrolled into view: JupyterLab renders a Markdown cell only
    once it has been on screen, so scroll down the notebook until it is there."""
    page = notebook.page
    box = notebook.bounding_box()
    assert box, "the notebook is not on screen"
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"], 400) / 2)
    for _ in range(tries):
        if target.count():
            target.first.scroll_into_view_if_needed()
            return target.first
        page.mouse.wheel(0, 1200)
        page.wait_for_timeout(250)
    raise AssertionError(f"scrolled through the notebook and never found {target}")


def slider_fraction(slider: Locator) -> float:
    """Where an ipywidgets slider's handle is, as a fraction of its track."""
    track = slider.locator(".noUi-target").bounding_box()
    handle = slider.locator(".noUi-handle").bounding_box()
    assert track and handle, "the slider is not on screen"
    centre = handle["x"] + handle["width"] / 2
    return min(1.0, max(0.0, (centre - track["x"]) / track["width"]))
