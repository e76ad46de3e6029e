"""Every script in benchmarks/ runs end to end with --smoke (issue 32, item 8).

Found by glob, so a new benchmark is covered as soon as it exists (and must take --smoke).
A smoke run takes seconds on 2 cores and asserts no speed target; the timeout is generous
for a busy CI machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
TIMEOUT_S = 120
#: A line each known script prints at the end of its table (a new script: any table).
LAST_WORDS = {
    "cell_latency": "spawn / warm",
    "compression": "counted bytes equal the formula",
    "grading": "fresh group per learner",
    "netem_fidelity": "worst ratio",
    "notebook_footprint": "unexpected errors: none",
    "overlap": "worst measured/model",
    "overlap_grading": "verdicts as expected: True",
    "recovery": "first failure",
    "ring_allreduce": "animate a 1024-rank ring",
    "simulate_scale": "the same rings with per-step arrays",
}


def test_there_are_benchmarks():
    assert SCRIPTS, "no benchmarks/*.py found"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_benchmark_smoke(script: Path):
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT)), "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    where = f"\n--- stdout:\n{done.stdout[-3000:]}\n--- stderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{script.name} --smoke exited {done.returncode}{where}"
    assert "has moved to" not in done.stderr, f"{script.name} imports an old path{where}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) >= 2, f"{script.name} --smoke printed no table{where}"
    assert any(ch.isdigit() for ch in done.stdout), f"{script.name} printed no numbers{where}"
    words = LAST_WORDS.get(script.stem)
    assert words is None or words in done.stdout, f"{script.name}: no {words!r}{where}"
