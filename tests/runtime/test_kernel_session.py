"""%%ranks seen from a real Jupyter kernel: live output, and the stop button."""

from __future__ import annotations

import re
import time

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from jupyter_client.manager import start_new_kernel  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        _run(kc, "%load_ext labsupport")
        _run(kc, "%%ranks -n 2\nrank")  # start the cluster once
        yield km, kc
    finally:
        _run(kc, "%ranks shutdown")
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run(kc, code: str, timeout: float = 120, on_start=None) -> list[tuple[float, dict]]:
    """Execute ``code``; return every iopub message of it, with its arrival time."""
    msg_id = kc.execute(code)
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append((time.monotonic(), msg))
        if on_start and msg["msg_type"] == "stream":
            on_start(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages
    raise TimeoutError(f"no reply to {code!r}")


def test_output_reaches_the_notebook_while_the_cell_runs(kernel):
    _, kc = kernel
    messages = _run(
        kc, "%%ranks\nimport time\nprint('before the sleep', flush=True)\ntime.sleep(4)\n'done'"
    )
    end = messages[-1][0]
    seen = [
        t
        for t, m in messages
        if m["msg_type"] == "stream" and "before the sleep" in m["content"]["text"]
    ]
    assert seen, "the line never reached the notebook"
    assert end - seen[0] > 2.0  # it arrived well before the 4 s sleep ended


def test_the_stop_button_shows_one_line_and_no_launcher_frames(kernel):
    km, kc = kernel
    started = []

    def interrupt_once(msg):
        if "looping" in msg["content"]["text"] and not started:
            started.append(True)
            km.interrupt_kernel()

    messages = _run(
        kc,
        "%%ranks\nimport time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)",
        on_start=interrupt_once,
    )
    errors = [m["content"] for _, m in messages if m["msg_type"] == "error"]
    assert started and len(errors) == 1
    shown = _ANSI.sub("", "\n".join(errors[0]["traceback"]))
    assert "labsupport/" not in shown and "run_cell_magic" not in shown
    assert shown.strip().splitlines() == [
        "CellInterrupted: interrupted on every rank; the ranks keep their state (a message "
        "sent but not yet received stays queued: %ranks restart clears it)"
    ]
    # and the ranks kept their state
    values = _run(kc, "%%ranks\nrank + 100")
    texts = "".join(m["content"].get("text", "") for _, m in values if m["msg_type"] == "stream")
    assert "[rank 1] Out: 101" in texts
