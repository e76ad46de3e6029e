"""``make test-gpu``'s script, here without a GPU: its dry run, and that a failure shows.

The dry run runs on the CPU with gloo every step whose CPU run is short, and checks the
others parse; the GPU run itself needs a lent NVIDIA machine (tests/gpu/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "run_gpu_check.py"
_spec = importlib.util.spec_from_file_location("run_gpu_check", SCRIPT)
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["run_gpu_check"] = gpu_check  # dataclasses look their module up
_spec.loader.exec_module(gpu_check)

#: What the dry run must run (not only parse) on the CPU.
RUN_HERE = {"doctor", "timing", "bench", "bench-fault", "hello_ranks", "ddp_overlap", "nb-nccl"}
RUN_HERE |= {"auto-4-ranks"}


@pytest.mark.timeout(900)
def test_the_dry_run_runs_the_short_steps_on_gloo_and_checks_the_rest(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    status = {s["name"]: s["status"] for s in report["steps"]}
    assert status.keys() == {s.name for s in gpu_check.build_steps(tmp_path)}
    assert {n for n, s in status.items() if s == "passed"} == RUN_HERE, status
    assert {s for n, s in status.items() if n not in RUN_HERE} == {"checked"}, status
    assert report["machine"]["torch"].startswith("2.")  # versions come from the doctor step
    timing = json.loads(next(s["summary"] for s in report["steps"] if s["name"] == "timing"))
    assert timing["device"] == "cpu" and timing["events_median"].endswith(" ms")
    assert "| hello_ranks | passed |" in (tmp_path / "gpu-check.md").read_text()
    assert (tmp_path / "bench.json").exists()
    assert "device cpu; sum of ranks 0" in (tmp_path / "gpu-check.log").read_text()


def _step(name: str, code: str, **kw) -> object:
    cmd = [sys.executable, "-c", code]
    return gpu_check.Step(name, name, 1, kw.pop("timeout_s", 30), 1, gpu=cmd, **kw)


def test_a_failing_step_is_reported_failed_and_the_run_exits_1(tmp_path):
    steps = [
        _step("exits-3", "import sys; print('boom'); sys.exit(3)"),
        _step("says-wrong", "print('device cpu')", expect={"cpu": "device cuda:0"}),
        _step("hangs", "import time; time.sleep(60)", timeout_s=1),
        _step("fine", "print('RESULT {\"ok\": 1}')"),
    ]
    report = gpu_check.Report(tmp_path, "test")
    code = gpu_check.run_all(steps, "cpu", report, gpu_check.child_env(None))
    assert code == 1
    saved = json.loads((tmp_path / "gpu-check.json").read_text())
    status = {s["name"]: (s["status"], s["summary"]) for s in saved["steps"]}
    assert status["exits-3"] == ("failed", "exit 3, expected 0: boom")
    assert status["says-wrong"][0] == "failed" and "device cuda:0" in status["says-wrong"][1]
    assert status["hangs"][0] == "timeout"
    assert status["fine"] == ("passed", '{"ok": 1}')
    assert saved["failed"] == ["exits-3", "says-wrong", "hangs"]
    assert "failed: exits-3, says-wrong, hangs" in (tmp_path / "gpu-check.md").read_text()


def test_the_report_is_written_after_each_step(tmp_path):
    """A run killed at the device's limit still returns the steps that ran."""
    seen = []
    report = gpu_check.Report(tmp_path, "test")
    original = report.write

    def write():
        original()
        seen.append(len(json.loads((tmp_path / "gpu-check.json").read_text())["steps"]))

    report.write = write
    steps = [_step("a", "pass"), _step("b", "pass")]
    assert gpu_check.run_all(steps, "cpu", report, gpu_check.child_env(None)) == 0
    assert seen == [1, 2]


def test_a_step_that_does_not_fit_the_budget_is_skipped_not_run(tmp_path):
    report = gpu_check.Report(tmp_path, "test")
    step = _step("late", "import sys; sys.exit(1)")
    assert gpu_check.run_all([step], "gpu", report, gpu_check.child_env(None), budget=0.5) == 0
    assert report.data["steps"][0]["status"] == "skipped"


def test_every_gpu_command_parses_and_names_files_that_exist(tmp_path):
    """The commands the machine will run: torchrun's flags, the examples' and the benchmark's."""
    for step in gpu_check.build_steps(tmp_path):
        assert gpu_check.parse_only(step)[0] == "checked", step.name


def test_the_parse_check_catches_a_flag_that_does_not_exist(tmp_path):
    bad = [
        gpu_check._tr("examples/capstone.py --strategy zero2"),
        gpu_check._tr("examples/ddp_overlap.py --no-such-flag"),
        gpu_check._tr("-m labsupport.runtime.bench --backend nccl -e 1X"),
        gpu_check._tr("--no-such-torchrun-flag examples/hello_ranks.py"),
    ]
    for cmd in bad:
        step = gpu_check.Step("bad", "bad", 1, 1, 60, gpu=cmd)
        assert gpu_check.parse_only(step)[0] == "failed", cmd
    missing = gpu_check.Step("nb", "nb", 1, 1, 60, gpu=["x"], files=["notebooks/nope.ipynb"])
    assert gpu_check.parse_only(missing) == ("failed", "missing: notebooks/nope.ipynb")
