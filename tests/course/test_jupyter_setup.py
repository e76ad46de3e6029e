"""What `make lab` sets up: one kernel name everywhere, installed into the venv (so that two
clones never share one), and course settings kept in the venv."""

from __future__ import annotations

import json
import re
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
        ["make", "--no-print-directory", "-n", "lab", "VENV=.venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    venv = str(ROOT / ".venv")
    assert f"JUPYTERLAB_SETTINGS_DIR={venv}/" in out
    assert f"JUPYTERLAB_WORKSPACES_DIR={venv}/" in out
    assert (
        ".venv/share/jupyter/lab/settings/overrides.json" in out
        or (ROOT / ".venv/share/jupyter/lab/settings/overrides.json").exists()
    )
    assert "~/.jupyter" not in out and "$HOME/.jupyter" not in out


def test_make_lab_installs_the_kernel_into_the_venv_not_the_home_folder():
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "VENV=.venv", ".venv/.stamp-lab"],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout  # fmt: skip
    name = _make_variable("KERNEL_NAME")
    assert f"-m ipykernel install --sys-prefix --name {name}" in out, out
    assert "--user" not in out


def _clone_venv(where: Path) -> Path:
    """A venv with this one's packages (a .pth file), as a second clone's `make lab` makes."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "course.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def test_each_clones_jupyter_finds_its_own_kernel_under_the_notebooks_name(tmp_path):
    """Two clones, each with `make lab`'s kernel, and an old `--user` kernel of the same
    name from a third: Jupyter started from either venv (JupyterLab's kernel list is
    jupyter_client's KernelSpecManager) starts that venv's Python for the notebooks'
    kernel name."""
    name = _make_variable("KERNEL_NAME")
    home = tmp_path / "home"
    stale = home / ".local" / "share" / "jupyter" / "kernels" / name
    stale.mkdir(parents=True)
    (stale / "kernel.json").write_text(json.dumps({
        "argv": ["/elsewhere/.venv/bin/python", "-m", "ipykernel_launcher", "-f",
                 "{connection_file}"], "display_name": "old", "language": "python"}))  # fmt: skip
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    spec = json.loads(NOTEBOOKS[0].read_text())["metadata"]["kernelspec"]["name"]
    pythons = [_clone_venv(tmp_path / clone / ".venv") for clone in ("a", "b")]
    for python in pythons:  # `make lab` in each clone, one after the other
        install = [str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", name]
        subprocess.run(install, env=env, capture_output=True, check=True)
    for python in pythons:
        found = subprocess.run(
            [str(python), "-c", "import sys; from jupyter_client.kernelspec import "
             "KernelSpecManager; print(KernelSpecManager().get_kernel_spec(sys.argv[1]).argv[0])",
             spec], env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert found == str(python), f"{python}'s Jupyter would start {found}"


def _lab_command(*variables: str) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "lab", "VENV=.venv", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _lab_root_and_start(command: str) -> tuple[Path, str]:
    root = re.search(r'--ServerApp\.root_dir="?([^"\s]+)"?', command)
    start = re.search(r"--LabApp\.default_url=/lab/tree/(\S*)", command)
    assert root and start, f"make lab names no root folder or start page: {command}"
    return Path(root.group(1)), start.group(1)


def test_make_lab_serves_the_repository_and_opens_on_the_notebooks():
    """JupyterLab cannot open a file above the folder it serves: it serves the repository
    (so ../REFERENCES.md opens) and starts in notebooks/, or LAB_DIR, or the zh-CN copies."""
    root, start = _lab_root_and_start(_lab_command())
    assert root == ROOT and start == "notebooks"
    assert _lab_root_and_start(_lab_command("LAB_DIR=slides")) == (ROOT, "slides")
    assert _lab_root_and_start(_lab_command("COURSE_LANG=zh_CN")) == (ROOT, "notebooks/zh_CN")
    outside = subprocess.run(
        ["make", "--no-print-directory", "-n", "lab", "VENV=.venv", "LAB_DIR=/tmp"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert outside.returncode != 0 and "not a folder of this repository" in outside.stderr


def test_every_link_a_learner_can_click_is_inside_what_make_lab_serves():
    root, _ = _lab_root_and_start(_lab_command())
    from test_links import _markdown_of, relative_links

    notebooks = sorted(ROOT.glob("notebooks/**/*.ipynb")) + sorted(ROOT.glob("slides/**/*.ipynb"))
    outside = []
    for path in notebooks:
        for link in relative_links(_markdown_of(path)):
            target = (path.parent / link.split("#")[0]).resolve()
            if not target.is_relative_to(root.resolve()):
                outside.append(f"{path.relative_to(ROOT)}: {link}")
    assert len(notebooks) > 20 and not outside, outside
