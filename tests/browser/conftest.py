"""The course in a real browser: JupyterLab and the slide decks, driven by Playwright.

Run with ``make test-browser`` (``make test`` leaves this folder out). The browser
is Debian's ``chromium`` ($CHROMIUM, default /usr/bin/chromium; the Makefile
installs it with apt-get when missing), never Playwright's own download.

Fixtures:

* ``lab``: a real JupyterLab from this repository's ``.venv``, on a free
  loopback port with a token, laid out as ``make lab`` serves the repository:
  its root holds REFERENCES.md and ``notebooks/`` (scratch copies of the
  learners' notebooks, so Run All never writes outputs into the repository),
  and it opens on ``notebooks/``; with the course's kernel
  ``collective-course`` pinned to this interpreter. It is stopped at the end of
  the session with every process it started, workers included, even when a
  test failed; a worker left behind is reported as an error.
* ``page``: a new browser page per test. When a test fails, a screenshot of
  every page it opened is saved under ``test-results/`` (gitignored).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

try:
    from playwright import sync_api as playwright_sync
except ImportError as exc:  # say how to get it rather than skipping quietly
    raise ImportError(
        f"{exc}: the browser tests need Playwright; `make test-browser` installs it "
        "(the `browser` extra) and Chromium"
    ) from exc

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "test-results"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: The flags every launch uses: headless, and no call home (this machine's
#: network is closed; without these Chromium keeps trying to reach its servers).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # we may be root, and the sandbox refuses to run as root
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: How the test names the worker processes of a %%ranks group (see launch/process.py).
WORKER_MODULE = "labsupport.runtime.launch.worker"


def worker_processes(root: psutil.Process | None = None) -> list[psutil.Process]:
    """The ``labsupport.runtime.launch.worker`` processes under ``root`` (all of ours if None)."""
    if root is None:
        candidates = list(psutil.process_iter())
    else:
        try:
            candidates = root.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
    found = []
    for proc in candidates:
        try:
            if WORKER_MODULE in " ".join(proc.cmdline()) and proc.status() != "zombie":
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab: its address, token, folder and server process."""

    url: str
    token: str
    root: Path  # the notebooks' folder (tests write their own notebooks here)
    proc: subprocess.Popen
    log: Path
    seen: dict[int, psutil.Process] = field(default_factory=dict)  # every descendant seen
    tree: str = ""  # the notebooks' folder as JupyterLab names it ("notebooks/")

    def open_url(self, path: str) -> str:
        """The address that opens ``path`` alone (``reset``: no tabs of an earlier test)."""
        return f"{self.url}/lab/tree/{self.tree}{path}?reset&token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Close every notebook's session, as "Shut Down All Kernels" does."""
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")

    def descendants(self) -> list[psutil.Process]:
        try:
            found = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        self.seen.update((p.pid, p) for p in found)
        return found

    def workers(self) -> list[psutil.Process]:
        self.descendants()
        return worker_processes(psutil.Process(self.proc.pid))


def still_running(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of ``procs`` still running (zombies aside) after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in procs if _running(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.3)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kernelspec(folder: Path) -> Path:
    """A ``collective-course`` kernelspec that runs this interpreter.

    ``make lab`` installs the kernel into the venv (``ipykernel install --sys-prefix``),
    but a bare ``.stamp-browser`` venv has none, and an older user-level install from a
    checkout elsewhere may point at its own ``.venv``; $JUPYTER_PATH comes first in
    Jupyter's search path, so the tests always run the code of this tree.
    """
    spec = folder / "kernels" / "collective-course"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Collective communication course",
                "language": "python",
                "metadata": {"debugger": True},
            }
        )
    )
    return folder


def _user_settings(folder: Path) -> Path:
    """The course's JupyterLab settings (jupyter/overrides.json, which `make lab`
    installs into the venv) written as user settings, so a bare pytest run gets
    them too: no news pop-up over the page, line numbers on."""
    overrides = json.loads((REPO / "jupyter" / "overrides.json").read_text())
    for plugin, values in overrides.items():
        package, name = plugin.split(":")
        path = folder / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return folder


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    served = base / "repo"  # what `make lab` serves: the repository
    root = served / "notebooks"
    root.mkdir(parents=True)
    # What a learner opens after `make lab`: their copies (no stored outputs), and the
    # references their links point to (../REFERENCES.md).
    for name in ("00_welcome.ipynb", "03_ring_allreduce.ipynb", "04_algorithms.ipynb"):
        shutil.copy(REPO / "notebooks" / name, root)
    shutil.copy(REPO / "REFERENCES.md", served)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_PATH=str(_kernelspec(base / "share")),
        # The Makefile's LAB_ENV, but fresh: no workspace or setting of an earlier run.
        JUPYTERLAB_SETTINGS_DIR=str(_user_settings(base / "user-settings")),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        IPYTHONDIR=str(base / "ipython"),
        # Output grouped by rank is what a learner sees on an idle laptop (cells
        # end within a second). Other jobs on a CI machine can slow a cell past
        # that, and the output would go live (interleaved); give it more room.
        LABSUPPORT_LIVE_AFTER="20",
        PYTHONUNBUFFERED="1",
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={served}",  # as the Makefile's LAB_ARGS
        "--LabApp.default_url=/lab/tree/notebooks",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "jupyterlab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=served, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Lab(f"http://127.0.0.1:{port}", token, root, proc, log, tree="notebooks/")
    try:
        _wait_until_up(server)
        yield server
    finally:
        leftovers = _stop(server)
        shutil.copy(log, _results_dir() / "jupyterlab.log")
    if leftovers:
        pytest.fail(f"processes left running after JupyterLab stopped (killed now): {leftovers}")


def _wait_until_up(server: Lab, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited at start:\n{server.log.read_text()[-3000:]}")
        try:
            server.api("status")
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer within {timeout:g} s")


def _stop(server: Lab) -> list[str]:
    """Stop JupyterLab and everything under it; describe what had to be killed."""
    server.descendants()  # remember every kernel and worker alive now
    if server.proc.poll() is None:
        os.killpg(server.proc.pid, signal.SIGTERM)  # Jupyter shuts its kernels down
        try:
            server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait()
    # Workers lead their own sessions; when their kernel goes they exit by themselves.
    left = still_running(list(server.seen.values()), 15)
    described = []
    for proc in left:
        try:
            described.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return described


def _results_dir() -> Path:
    RESULTS.mkdir(exist_ok=True)
    return RESULTS


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: run `make test-browser` (it installs Debian's chromium "
            "with apt-get when run as root), or set CHROMIUM=/path/to/chromium"
        )
    with playwright_sync.sync_playwright() as pw:
        # Playwright gives each launch a new, empty profile (--user-data-dir).
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "report_call", None)
    return report is None or report.failed


def save_screenshot(page: object, name: str) -> None:
    """Save a screenshot of ``page`` as test-results/NAME.png (never raises)."""
    path = _results_dir() / f"{name}.png"
    try:
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot saved: {path}")
    except Exception as exc:
        print(f"no screenshot {name}: {exc}")


@pytest.fixture
def context(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    """A fresh browser context; if the test fails, a screenshot of each of its pages."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(30_000)
    try:
        yield ctx
    finally:
        if _failed(request):
            for i, pg in enumerate(ctx.pages):
                save_screenshot(pg, f"{request.node.name}-end-{i}")
        ctx.close()


@pytest.fixture
def page(context: object) -> object:
    return context.new_page()


@pytest.fixture
def step(
    page: object, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], None]]:
    """``step("name")`` screenshots the page after a step; kept if the test fails.

    The pictures land in test-results/<test>/NN-name.png, in the order taken
    (KEEP_SCREENSHOTS=1 keeps them when it passes too).
    """
    taken: list[Path] = []

    def take(name: str) -> None:
        path = tmp_path / f"{len(taken):02d}-{name}.png"
        try:
            page.screenshot(path=str(path))
            taken.append(path)
        except Exception:
            pass

    yield take
    if (_failed(request) or os.environ.get("KEEP_SCREENSHOTS")) and taken:
        folder = _results_dir() / request.node.name
        folder.mkdir(exist_ok=True)
        for path in taken:
            shutil.copy(path, folder / path.name)
        print(f"screenshots of each step: {folder}")
