"""The package's layout, read from its source: tiers, code lines, the import graph, the map.

Shared by tests/course/test_layout.py (which asserts on it) and anyone who wants the numbers
(``python tests/course/layout.py`` prints the lines per tier and each mapped file's size).

* **Tiers.** The teaching core is every module of ``labsupport/`` outside
  ``labsupport/runtime/``, less the facade (``labsupport/__init__.py``: the names a
  notebook imports) and the old names' aliases (``labsupport/_moved.py``); the runtime is
  ``labsupport/runtime/``; the instructor's kit is ``kit/labkit/``.
* **Code lines** are what is left once blank lines, comments and docstrings are taken
  out: the why beside the line is free, the code is budgeted.
* **Imports** are read with ``ast``: module level only for the graph (an import inside
  a function runs later, on a rank or on first use), everything for the tiers (a core
  module may not even reach the runtime from inside a function). ``if TYPE_CHECKING:``
  blocks are left out: they never run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "labsupport"
RUNTIME = PACKAGE / "runtime"
KIT = ROOT / "kit" / "labkit"
NOT_CORE = {PACKAGE / "__init__.py", PACKAGE / "_moved.py"}


def code_lines(path: Path) -> int:
    """Lines of ``path`` that hold code: not blank, not a comment, not a docstring."""
    source = path.read_text(encoding="utf-8")
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip or tok.type == tokenize.ENDMARKER:
            continue
        lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docstrings)
    return len(lines)


def core_files() -> list[Path]:
    """Every module of the teaching core."""
    return sorted(
        p
        for p in PACKAGE.rglob("*.py")
        if RUNTIME not in p.parents and p not in NOT_CORE and "__pycache__" not in p.parts
    )


def runtime_files() -> list[Path]:
    """Every module of the runtime."""
    return sorted(p for p in RUNTIME.rglob("*.py") if "__pycache__" not in p.parts)


def kit_files() -> list[Path]:
    """Every module of the instructor's kit."""
    return sorted(p for p in KIT.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    """``labsupport/netem/link.py`` -> ``labsupport.netem.link`` (a package: its folder)."""
    base = KIT.parent if KIT in path.parents else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Module:
    """One module: its name, file, and the modules it imports (module level, and anywhere)."""

    name: str
    path: Path
    is_package: bool
    top: set[str] = field(default_factory=set)
    anywhere: set[str] = field(default_factory=set)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, module: Module) -> list[str]:
    """What an import asks for: ``a.b`` for ``import a.b``, ``a:b`` for ``from a import b``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.name.split(".")
        if not module.is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}:{alias.name}" for alias in node.names]


def read_modules(files: list[Path]) -> dict[str, Module]:
    """Parse ``files`` and record what each imports."""
    modules = {}
    for path in files:
        name = module_name(path)
        modules[name] = Module(name, path, path.name == "__init__.py")

    def visit(body: list[ast.stmt], module: Module, top: bool) -> None:
        for node in body:
            if isinstance(node, ast.If) and _type_checking(node.test):
                visit(node.orelse, module, top)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _imported(node, module):
                    module.anywhere.add(name)
                    if top:
                        module.top.add(name)
                continue
            inner = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child], module, top and not inner)
                else:
                    for sub in ast.walk(child):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            module.anywhere.update(_imported(sub, module))

    for module in modules.values():
        visit(ast.parse(module.path.read_text(encoding="utf-8")).body, module, True)
    return modules


def resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The module a dotted import name lands in: the longest known prefix, or None."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def graph(modules: dict[str, Module], anywhere: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports (``from a import b``: ``a.b`` if a module, else ``a``)."""
    edges: dict[str, set[str]] = {}
    for module in modules.values():
        found = set()
        for asked in module.anywhere if anywhere else module.top:
            prefix, _, name = asked.partition(":")
            target = (
                f"{prefix}.{name}" if f"{prefix}.{name}" in modules else resolve(prefix, modules)
            )
            if target and target != module.name:
                found.add(target)
        edges[module.name] = found
    return edges


def unit(name: str) -> str:
    """The subpackage a module belongs to (a top-level module is its own)."""
    parts = name.split(".")
    if parts[0] == "labsupport" and len(parts) > 1 and parts[1] == "runtime":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


MAP = PACKAGE / "README.md"
_ROW = re.compile(r"^\|\s*(?P<nb>[^|]+?)\s*\|\s*(?P<concept>[^|]+?)\s*\|\s*(?P<file>[^|]+?)\s*\|")


@dataclass
class MapRow:
    """One row of the map: the notebooks (two-digit numbers), the concept, the file."""

    notebooks: list[str]
    concept: str
    file: str


def read_map(text: str | None = None) -> list[MapRow]:
    """The rows of ``labsupport/README.md``'s table (file: the first code span's path)."""
    text = MAP.read_text(encoding="utf-8") if text is None else text
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m or set(m["nb"]) <= {"-", ":", " "} or m["nb"].lower().startswith("notebook"):
            continue
        span = re.search(r"`([^`]+\.py)", m["file"])
        if span is None:
            continue
        rows.append(MapRow(re.findall(r"\b\d\d\b", m["nb"]), m["concept"], span.group(1)))
    return rows


def main() -> None:
    """Print the lines per tier and each core file's code lines."""
    tiers = {"core": core_files(), "runtime": runtime_files(), "kit": kit_files()}
    for tier, files in tiers.items():
        code = sum(code_lines(p) for p in files)
        physical = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
        print(f"{tier:8} {len(files):4} modules {code:6} code lines {physical:6} lines")
    for path in tiers["core"]:
        print(f"{code_lines(path):5}  {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
