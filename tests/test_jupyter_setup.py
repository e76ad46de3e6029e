"""What `make lab` sets up: one kernel name everywhere, and course settings kept in the venv."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(
    ROOT.glob("notebooks/solutions/*.ipynb")
)


def _make_variable(name: str) -> str:
    match = re.search(rf"^{name}\s*:?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, f"{name} not set in the Makefile"
    return match.group(1).strip()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_notebook_names_the_kernel_make_lab_registers(path):
    spec = json.loads(path.read_text())["metadata"]["kernelspec"]
    assert spec["name"] == _make_variable("KERNEL_NAME")
    assert spec["display_name"] == _make_variable("KERNEL_DISPLAY")


def test_the_py_twins_name_the_same_kernel():
    for twin in ROOT.glob("notebooks/solutions/*.py"):
        assert f"#     name: {_make_variable('KERNEL_NAME')}\n" in twin.read_text(), twin


def test_course_settings_are_real_jupyterlab_settings():
    """A misspelt plugin or setting would be ignored without a word: check both."""
    overrides = json.loads((ROOT / "jupyter" / "overrides.json").read_text())
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    if not schemas.is_dir():
        pytest.skip("JupyterLab is not installed here")
    for plugin, settings in overrides.items():
        package, _, name = plugin.partition(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key in settings:
            assert key in schema["properties"], f"{plugin} has no setting {key!r}"
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


def test_make_lab_keeps_settings_inside_the_venv():
    out = subprocess.run(
        ["make", "-n", "lab", "VENV=.venv"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    venv = str(ROOT / ".venv")
    assert f"JUPYTERLAB_SETTINGS_DIR={venv}/" in out
    assert f"JUPYTERLAB_WORKSPACES_DIR={venv}/" in out
    assert (
        ".venv/share/jupyter/lab/settings/overrides.json" in out
        or (ROOT / ".venv/share/jupyter/lab/settings/overrides.json").exists()
    )
    assert "~/.jupyter" not in out and "$HOME/.jupyter" not in out
