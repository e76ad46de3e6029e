"""Every sentence a grader returns is marked for translation (issue 37).

Over ``labsupport/runtime/check/*.py``: a string literal (a constant, or an f-string with
at least two letters outside its fields) passed to ``report()``, ``CheckResult()``,
``per_rank_message()``, ``explain_failure()`` (its ``hints`` too) or ``not_implemented()``,
or returned by a function of these modules, must be inside ``_()`` or ``N_()``, and no
f-string may be inside ``_()`` (a translator could never match it). Docstrings, dict keys
and indexes, strings that are identifiers only and HTML markup are exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "labsupport" / "runtime" / "check"
#: The calls whose message arguments a learner reads.
SINKS = {"report", "CheckResult", "per_rank_message", "explain_failure", "not_implemented"}
MARKERS = {"_", "N_"}
#: Modules not yet checked (none: every module of the package is).
PENDING: set[str] = set()
MODULES = sorted(p.stem for p in CHECK.glob("*.py"))
_TAG = re.compile(r"<[^<>]*>")  # markup (an HTML tag, its attributes) is not a message
_IDENTIFIER = re.compile(r"^[\w.\-/:\[\]()]*$")


def _letters(node: ast.AST) -> int:
    """Letters of a string literal outside its f-string fields and outside HTML tags."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "{}".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else ""
            for v in node.values
        )
    else:
        return 0
    return sum(c.isalpha() for c in _TAG.sub(" ", text))


def _is_text(node: ast.AST) -> bool:
    """A string literal a person reads: two letters or more, not a bare identifier."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _letters(node) >= 2 and not _IDENTIFIER.match(node.value)
    return isinstance(node, ast.JoinedStr) and _letters(node) >= 2


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def unwrapped(source: str, filename: str = "<module>") -> list[str]:
    """``line: text`` of each literal on a message path that is not marked, and each
    f-string inside ``_()``."""
    tree = ast.parse(source, filename)
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    found: list[str] = []

    def literals(node: ast.AST) -> list[ast.AST]:
        """The string literals in an expression, not inside a nested marker call, not keys."""
        out = []
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, ast.Call) and _name(current) in MARKERS:
                continue
            if isinstance(current, ast.Dict):
                stack += [v for v in current.values if v is not None]
                continue
            if isinstance(current, ast.JoinedStr):
                out.append(current)
                continue
            if isinstance(current, ast.Constant):
                out.append(current)
                continue
            if isinstance(current, ast.Subscript):
                stack.append(current.value)  # an index is a key
                continue
            if isinstance(current, ast.Compare):
                continue  # a value compared with a literal: the literal is a key, not shown
            stack += list(ast.iter_child_nodes(current))
        return out

    def flag(node: ast.AST) -> None:
        if id(node) in docstrings or not _is_text(node):
            return
        text = ast.get_source_segment(source, node) or ""
        found.append(f"{node.lineno}: {text[:70]}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node) in SINKS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for literal in literals(arg):
                    flag(literal)
        elif isinstance(node, ast.Return) and node.value is not None:
            for literal in literals(node.value):
                flag(literal)
        elif isinstance(node, ast.Call) and _name(node) in MARKERS:
            for arg in node.args:
                if isinstance(arg, ast.JoinedStr):
                    found.append(f"{arg.lineno}: an f-string inside _(): use named placeholders")
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if m not in PENDING])
def test_every_message_on_a_graders_return_path_is_marked(module):
    path = CHECK / f"{module}.py"
    problems = unwrapped(path.read_text(encoding="utf-8"), str(path))
    assert not problems, f"{path.name}: wrap these in _() (named placeholders):\n" + "\n".join(
        problems
    )


def test_the_pending_modules_exist():
    assert set(MODULES) >= PENDING  # a renamed module must leave this list too


@pytest.mark.parametrize(
    "source",
    [
        'def check():\n    return report(False, f"FAIL {name}: wrong on {n} ranks")',
        'def check():\n    return report(False, "FAIL it is wrong")',
        'def check():\n    return explain_failure(err, name, 5, hints={"timeout": "a deadlock?"})',
        'def f():\n    return f"{want} a tensor {got}"',
        'def f():\n    return _(f"{want} a tensor")',
        'def f():\n    return "it failed" if bad else None',
    ],
)
def test_an_unmarked_message_is_found(source):
    assert unwrapped(source)


@pytest.mark.parametrize(
    "source",
    [
        'def check():\n    """A docstring, with words."""\n    return report(True, f"{PASS} " + '
        '_("{name}: right").format(name=name))',
        'def f():\n    return {"exact": 1}["exact"]',
        'def f():\n    return sum(r["t"] for r in rows if r["class"] != "pipeline bubble")',
        'def f():\n    return "ring_allreduce"',
        'def f():\n    return f"[{key!r}]: {difference}"',
        'def f():\n    return explain_failure(e, n, 5, hints={"timeout": N_("a deadlock?")})',
        'def f():\n    return _("{a} and {b}").format(a=1, b=2)',
        'def f():\n    return f\'<div class="check" style="{style}">{body}</div>\'',
    ],
)
def test_a_marked_message_docstring_key_or_identifier_passes(source):
    assert unwrapped(source) == []
