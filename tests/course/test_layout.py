"""The package's layout: three tiers, one way, no cycle, a small core, and its map."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import layout as L

ROOT = L.ROOT
ALL = L.core_files() + L.runtime_files() + L.kit_files()
FACADE = [L.PACKAGE / "__init__.py", L.PACKAGE / "_moved.py"]
MODULES = L.read_modules(ALL + FACADE)
CORE = {L.module_name(p) for p in L.core_files()}
RUNTIME = {L.module_name(p) for p in L.runtime_files()}
KIT = {L.module_name(p) for p in L.kit_files()}
TWINS = {p.name[:2]: p for p in (ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.py")}


def _imports_of(names: set[str], anywhere: bool = True) -> dict[str, set[str]]:
    edges = L.graph(MODULES, anywhere=anywhere)
    return {m: edges[m] for m in names}


def _unit_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for a, targets in edges.items():
        for b in targets:
            if L.unit(a) != L.unit(b):
                units.setdefault(L.unit(a), set()).add(L.unit(b))
    return units


# --------------------------------------------------------------------------- the tiers
def test_every_module_is_in_one_tier():
    assert CORE and RUNTIME and KIT
    assert not (CORE & RUNTIME or CORE & KIT or RUNTIME & KIT)
    assert all(name.startswith("labsupport.runtime") for name in RUNTIME)
    assert all(name.startswith("labkit") for name in KIT)


def test_the_core_imports_nothing_from_the_runtime_the_kit_or_the_facade():
    # anywhere: an import inside a function is still the core reaching outside itself.
    # The one exception, for one release: labsupport._moved, the old names' aliases, which
    # imports nothing of the runtime until an old name is asked for.
    allowed = CORE | {"labsupport._moved"}
    outside = {
        m: sorted(t for t in ts if t not in allowed and t.startswith(("labsupport", "labkit")))
        for m, ts in _imports_of(CORE).items()
    }
    assert {m: t for m, t in outside.items() if t} == {}
    assert not {t for t in L.graph(MODULES)["labsupport._moved"] if t.startswith("labsupport")}


def test_the_runtime_never_imports_the_kit():
    found = {m: sorted(t for t in ts if t in KIT) for m, ts in _imports_of(RUNTIME).items()}
    assert {m: t for m, t in found.items() if t} == {}


def test_no_import_cycle_between_modules_or_between_subpackages():
    top = L.graph(MODULES)  # module level: what runs when the module is imported
    assert L.cycles(top) == []
    assert L.cycles(_unit_edges(top)) == []


def test_no_cycle_even_through_imports_inside_functions():
    # Moving an import into a function would hide a cycle from the test above; there is none.
    anywhere = L.graph(MODULES, anywhere=True)
    assert L.cycles(anywhere) == []
    assert L.cycles(_unit_edges(anywhere)) == []


def test_the_cycle_finder_finds_a_cycle():
    assert L.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert L.cycles({"a": {"b"}, "b": set()}) == []


def test_from_package_import_submodule_points_at_the_submodule(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from p.b import x\n")
    (pkg / "a.py").write_text("from p import b\ndef f():\n    import p.c\n")
    (pkg / "b.py").write_text("x = 1\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.a\n"
    )
    files = sorted(pkg.glob("*.py"))
    old_root = L.ROOT
    try:
        L.ROOT = tmp_path
        mods = L.read_modules(files)
    finally:
        L.ROOT = old_root
    top, anywhere = L.graph(mods), L.graph(mods, anywhere=True)
    assert top["p.a"] == {"p.b"}  # not the package p, whose __init__ imports b
    assert anywhere["p.a"] == {"p.b", "p.c"}
    assert top["p.c"] == set()  # TYPE_CHECKING never runs


# --------------------------------------------------------------------------- sizes
def test_code_lines_leave_out_comments_and_docstrings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        '"""Doc\n\nmore."""\n\n# why\nx = 1  # beside\n\n\n'
        'def g():\n    """Doc."""\n    return (\n        x\n    )\n'
    )
    assert L.code_lines(f) == 5  # x = 1, def, return (, x, )


def test_the_teaching_core_is_small():
    total = sum(L.code_lines(p) for p in L.core_files())
    assert total <= 3600, f"the teaching core has {total} code lines (budget 3,600)"


def test_each_core_file_is_at_most_160_code_lines():
    big = {str(p.relative_to(ROOT)): L.code_lines(p) for p in L.core_files()}
    assert {f: n for f, n in big.items() if n > 160} == {}


def test_no_noqa_for_docstrings_in_the_core():
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in L.core_files()
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"noqa:.*\bD\d", line)
    ]
    assert found == []
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    core_ignores = re.findall(r'^"(labsupport/(?!runtime/)[^"]+)" = \[[^\]]*"D', config, re.M)
    assert core_ignores == []


# --------------------------------------------------------------------------- the map
ROWS = L.read_map()


def test_the_map_reader_reads_a_table():
    text = "| notebook | concept | file |\n|---|---|---|\n| 03, 04 | ring | `a/b.py` (`f`) |\n"
    rows = L.read_map(text)
    assert [(r.notebooks, r.file) for r in rows] == [(["03", "04"], "a/b.py")]


def test_every_file_the_map_lists_exists_and_is_in_the_core():
    assert len(ROWS) >= 20
    core = {str(p.relative_to(ROOT)) for p in L.core_files()}
    assert [r.file for r in ROWS if r.file not in core] == []


def test_every_core_file_is_on_the_map():
    core = {str(p.relative_to(ROOT)) for p in L.core_files() if p.name != "__init__.py"}
    assert sorted(core - {r.file for r in ROWS}) == []


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.file)
def test_each_mapped_file_is_named_in_its_notebooks(row):
    for nb in row.notebooks:
        assert nb in TWINS, f"the map names notebook {nb}, which does not exist"
        text = TWINS[nb].read_text(encoding="utf-8")
        assert row.file in text, f"notebook {TWINS[nb].name} never names {row.file}"


# --------------------------------------------------------------------------- import cost
HEAVY = ("torch", "matplotlib", "ipywidgets", "nbformat", "yaml", "labkit", "numpy")


def test_import_labsupport_is_light():
    code = f"import sys, labsupport; print(sorted(m for m in {HEAVY} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


# --------------------------------------------------------------------------- old names
def test_an_old_module_path_imports_the_new_module_and_says_so():
    code = (
        "import importlib, labsupport.runtime.check.ring as new\n"
        "old = importlib.import_module('labsupport.check.ring')\n"
        "print(old is new)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "True"
    assert "labsupport.check.ring has moved to labsupport.runtime.check.ring" in out.stderr


def test_every_old_name_leads_somewhere():
    from labsupport import _moved

    for old, new in _moved.MOVED.items():
        path = ROOT / (new.replace("labkit", "kit/labkit", 1).replace(".", "/"))
        assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), (old, new)
    assert _moved.new_name("labsupport.netem.clock") == "labsupport.runtime.emulator.clock"
    assert _moved.new_name("labsupport.netem.link") is None  # the model stayed
    assert _moved.new_name("labsupport.bench.device") == "labsupport.runtime.device"
    assert _moved.new_name("labsupport.bench.core") == "labsupport.runtime.bench.core"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("labsupport.bench", "labsupport.runtime.bench"),
        ("labsupport.check.capstone grade", "labkit.capstone"),
        ("labsupport.exercises", "labkit.exercises"),
        ("labsupport.topology astra", "labsupport.runtime.astra"),
    ],
)
def test_an_old_command_still_runs_and_names_the_new_one(old, new):
    out = subprocess.run(
        [sys.executable, "-m", *old.split(), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout
    assert f"has moved to {new}" in out.stderr


def test_an_old_name_of_a_core_package_still_works_and_says_where_it_went():
    code = (
        "from labsupport import netem\n"
        "from labsupport.runtime import emulator\n"
        "print(netem.set_network is emulator.set_network)\n"
        "try:\n    netem.no_such_name\nexcept AttributeError as e:\n    print(e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.splitlines() == [
        "True",
        "module 'labsupport.netem' has no attribute 'no_such_name'",
    ]
    assert "labsupport.netem.set_network has moved to labsupport.runtime.emulator" in out.stderr
