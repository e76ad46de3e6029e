"""The two ways to set up (the Makefile's venv and conda's environment.yml) install the same
packages under the same pins, and each pin lives in one place."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower()


def _conda() -> tuple[list[str], list[str]]:
    """(conda packages, pip lines) of environment.yml."""
    deps = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = [line for d in deps if isinstance(d, dict) for line in d["pip"]]
    return conda, pip


def _make_extras(target: str) -> str:
    """The extras the Makefile's ``target`` stamp installs, e.g. ``lab,test``."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split(f"$(VENV)/{target}:", 1)[1].split("\n\n", 1)[0]
    match = re.search(r"-e '\.\[([^\]]*)\]'", recipe)
    assert match, f"the Makefile's {target} installs no extras"
    return match.group(1)


def test_conda_installs_the_makefiles_test_environment_under_its_constraints():
    conda, pip = _conda()
    assert sorted(_name(c.split("=")[0]) for c in conda) == ["pip", "python"], (
        "environment.yml installs packages with conda: pip installs them all from pyproject"
    )
    assert "-c constraints.txt" in pip, "environment.yml does not apply constraints.txt"
    assert f"-e .[{_make_extras('.stamp-test')}]" in pip
    assert "-e ./kit[maintainer]" in pip, "environment.yml does not install the instructor's kit"
    recipe = (ROOT / "Makefile").read_text().split("$(VENV)/.stamp-test:", 1)[1].split("\n\n")[0]
    assert "-e './kit[maintainer]'" in recipe, "make test does not install the instructor's kit"
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()


def test_condas_python_is_one_pyproject_allows():
    conda, _ = _conda()
    python = next(c for c in conda if c.startswith("python"))
    major, minor = (int(n) for n in python.split("=")[1].split(".")[:2])
    low = re.fullmatch(r">=(\d+)\.(\d+)", _pyproject()["requires-python"])
    assert low and (major, minor) >= (int(low[1]), int(low[2]))


def test_each_package_is_pinned_in_one_place():
    project = _pyproject()
    listed = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        listed += [r for r in extra if not r.startswith("labsupport")]
    capped = {_name(r) for r in listed if re.search(r"<|==", r)}
    pinned = {
        _name(line)
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not capped & pinned - {"torch"}, (
        f"capped in pyproject and constraints.txt: {capped & pinned}"
    )


def test_the_test_extra_builds_on_the_lab_extra():
    extras = _pyproject()["optional-dependencies"]
    assert "labsupport[lab]" in extras["test"]
    assert not {_name(r) for r in extras["lab"]} & {_name(r) for r in extras["test"]}


def _imports(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r"^\s*(?:import|from) (\w+)", text, re.M))
    return found


def test_what_labsupport_imports_at_its_core_is_a_core_dependency():
    core = {_name(r) for r in _pyproject()["dependencies"]}
    assert {"psutil", "pyyaml"} <= core
    # reading and writing notebooks is the instructor's kit's, not the learner's package's
    assert "nbformat" not in core
    assert "nbformat" not in _imports(ROOT / "labsupport")


def test_the_kit_declares_what_it_imports():
    kit = tomllib.loads((ROOT / "kit" / "pyproject.toml").read_text())["project"]
    needs = {_name(r) for r in kit["dependencies"]}
    assert {"labsupport", "nbformat", "psutil"} <= needs
    assert {"nbformat", "psutil", "labsupport"} <= _imports(ROOT / "kit" / "labkit")


def _pip_lines(*args: str, env: dict | None = None) -> list[str]:
    """The pip commands `make -n -B` prints for a fresh venv (every stamp out of date)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "VENV=/nonexistent/venv", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return [
        line for line in done.stdout.splitlines() if re.search(r"-m pip (install|download)", line)
    ]


MIRROR = "https://mirror.example.cn/pypi/simple"
EXTRA = "--extra-index-url https://download.pytorch.org/whl/cpu"


@pytest.mark.parametrize(
    "targets",
    [
        ("lab",),
        ("test",),
        ("lab", "COURSE_LANG=zh_CN"),
        ("test-browser",),
        ("wheelhouse",),
        ("npu",),
    ],
)
def test_every_pip_call_gets_pip_extra_and_the_mirror(targets):
    lines = _pip_lines(*targets, f"PIP_EXTRA={EXTRA}", f"PIP_INDEX_URL={MIRROR}")
    assert lines, f"make {' '.join(targets)} runs no pip"
    for line in lines:
        assert EXTRA in line and f"--index-url {MIRROR}" in line, line
        assert "-c constraints.txt" in line, line


def test_a_mirror_in_the_environment_reaches_pip_and_a_wheelhouse_still_wins():
    env = {**os.environ, "PIP_INDEX_URL": MIRROR}
    for line in _pip_lines("lab", env=env):
        assert f"--index-url {MIRROR}" in line, line
    # both on the command line: the wheelhouse's --no-index is not lost to PIP_EXTRA
    for line in _pip_lines("lab", f"PIP_EXTRA={EXTRA}", "WHEELHOUSE=wheelhouse"):
        assert EXTRA in line and "--no-index --find-links wheelhouse" in line, line
    env.pop("PIP_INDEX_URL")
    for line in _pip_lines("lab", env=env):
        assert "--index-url" not in line.replace("--extra-index-url", ""), line


def test_the_npu_extra_is_the_torch_npu_paired_with_the_pinned_torch():
    """torch_npu pairs with one torch release (Ascend/pytorch's COMPATIBILITY.md, 版本配套);
    torch-npu 2.13.0's wheel requires torch==2.13.0.* (checked with pip install --dry-run)."""
    npu = _pyproject()["optional-dependencies"]["npu"]
    torch = next(
        line.split("==")[1].strip()
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    assert npu == [f"torch-npu=={torch}"], npu
    # torch_npu's documented order: torch, then pyyaml and setuptools, then torch-npu
    lines = _pip_lines("npu", "VENV=/nonexistent/venv")
    order = [
        next(i for i, line in enumerate(lines) if words in line)
        for words in ("'.[lab]'", "pyyaml setuptools", "'.[npu]'")
    ]
    assert order == sorted(order), lines


@pytest.mark.parametrize("name", ["README.md", "README.zh-CN.md"])
def test_the_readmes_name_both_cann_scripts_and_torch_npus_order(name):
    """CANN's environment script is in ascend-toolkit/ on older releases and cann/ on newer
    ones (torch_npu's installation guide), with NNAL's beside it; torch_npu's own order."""
    text = (ROOT / name).read_text()
    for script in (
        "/usr/local/Ascend/ascend-toolkit/set_env.sh",
        "/usr/local/Ascend/cann/set_env.sh",
        "/usr/local/Ascend/nnal/atb/set_env.sh",
    ):
        assert f"source {script}" in text, f"{name} does not name {script}"
    assert "make npu" in text and "COMPATIBILITY.md" in text
    assert "pip install -c constraints.txt -e '.[npu]'" in text
