"""Exercise graders: run your function on every rank next to a reference, and say what differed.

Every grader shows one kind message and returns a :class:`CheckResult` (true when
passed). A message starts with its status as a word, ``PASS``, ``FAIL`` or ``TODO``
(coloured in JupyterLab, plain text elsewhere), then says what it found, one line
per rank or per fact, the most useful first. A grader never raises because of your
answer, so a notebook's "Run All" goes on past an unfinished exercise, and it never
passes a function that still raises ``NotImplementedError`` (it says "not
implemented yet" instead).

* :func:`check_on_ranks` - call ``reference(*args)`` then ``fn(*args)`` on every rank of a
  :class:`~labsupport.launch.Cluster` (``args`` built on each rank by ``make_args``) and
  compare the results rank by rank.
* :func:`check_function` - the same for a plain function run here, on a list of cases.
* :func:`check_values` - compare values you predicted with the real ones.
* :func:`describe_difference` - the comparison itself: None when equal, else a sentence.
* :func:`cluster_for_check` - which cluster a check runs on (the running one by default).

Write a grader for a new exercise in ``labsupport/checks/<topic>.py`` as a reference
function plus a ``make_args(rank, world_size)`` that builds each rank's inputs, and
call :func:`check_on_ranks` (see ``checks/primitives.py``).

Tensors are compared exactly when ``exact=True`` or when they hold integers, and with
``torch.allclose(rtol, atol)`` otherwise; lists, tuples and dicts element by element.
"""

from __future__ import annotations

import contextlib
import copy
import html
import re
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

PASS = "PASS"
FAIL = "FAIL"
TODO = "TODO"
# Colour and a decorative mark for the HTML display; the word alone carries the meaning
# (an emoji-only status renders as an empty box on a machine without an emoji font).
_STYLE = {PASS: ("#1a7f37", "\u2713"), FAIL: ("#cf222e", "\u2717"), TODO: ("#9a6700", "\u2026")}


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a check: ``passed`` (also its truth value) and the message shown."""

    passed: bool
    message: str
    implemented: bool = True

    def __bool__(self) -> bool:
        return self.passed

    @property
    def status(self) -> str:
        """``PASS``, ``FAIL`` or ``TODO`` (not implemented yet)."""
        return PASS if self.passed else (FAIL if self.implemented else TODO)

    def _ipython_display_(self) -> None:
        """Nothing to show: the grader has already printed the message."""


# ------------------------------------------------------------------- comparison


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value).replace("\n", " ")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tensor_difference(
    expected: torch.Tensor, got: Any, exact: bool, rtol: float, atol: float, words: tuple[str, str]
) -> str | None:
    want, have = words
    if not isinstance(got, torch.Tensor):
        return f"{want} a tensor {_short(expected)}, {have} {type(got).__name__} {_short(got)}"
    if got.shape != expected.shape:
        return (
            f"{want} shape {tuple(expected.shape)}, {have} shape {tuple(got.shape)} "
            f"({want} {_short(expected)}, {have} {_short(got)})"
        )
    if got.dtype != expected.dtype:
        return f"{want} dtype {expected.dtype}, {have} {got.dtype} ({_short(got)})"
    got, expected = got.detach().cpu(), expected.detach().cpu()
    if exact or not expected.dtype.is_floating_point:
        same = got == expected
    else:
        same = torch.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bool(same.all()):
        return None
    first = tuple(int(i) for i in (~same).nonzero()[0])
    where = first[0] if len(first) == 1 else first
    return (
        f"{want} {_short(expected)}, {have} {_short(got)} (first difference at index {where}: "
        f"{want} {expected[first].item()}, {have} {got[first].item()})"
    )


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, int | float | str | bool)


def describe_difference(
    expected: Any,
    got: Any,
    *,
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    words: tuple[str, str] = ("expected", "got"),
) -> str | None:
    """None if ``got`` matches ``expected``; otherwise one sentence saying what differs.

    ``words`` name the two sides in the sentence (e.g. ``("the ranks hold", "you said")``).
    """
    want, have = words
    options = {"exact": exact, "rtol": rtol, "atol": atol, "words": words}
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(expected, got, exact, rtol, atol, words)
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return f"{want} a {type(expected).__name__} of {len(expected)}, {have} {_short(got)}"
        if len(got) != len(expected):
            return f"{want} {len(expected)} items, {have} {len(got)}: {_short(got)}"
        if all(_is_scalar(x) for x in [*expected, *got]):  # short lists read best whole
            pairs = zip(expected, got, strict=True)
            same = all(describe_difference(e, g, **options) is None for e, g in pairs)
            return None if same else f"{want} {_short(expected)}, {have} {_short(got)}"
        for index, (e, g) in enumerate(zip(expected, got, strict=True)):
            difference = describe_difference(e, g, **options)
            if difference:
                return f"item {index}: {difference}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return f"{want} a dict with keys {sorted(expected)}, {have} {_short(got)}"
        for key in expected:
            difference = describe_difference(expected[key], got[key], **options)
            if difference:
                return f"[{key!r}]: {difference}"
        return None
    if isinstance(got, torch.Tensor):
        return f"{want} {_short(expected)}, {have} a tensor {_short(got)}"
    if isinstance(expected, float) and isinstance(got, int | float) and not exact:
        close = abs(got - expected) <= atol + rtol * abs(expected)
        return None if close else f"{want} {expected!r}, {have} {got!r}"
    return None if got == expected else f"{want} {_short(expected)}, {have} {_short(got)}"


def _to_cpu(value: Any) -> Any:
    """Results as CPU tensors (device tensors must not travel back to the kernel)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------- messages


def as_html(message: str) -> str:
    """The message as HTML: its leading status word coloured, its lines kept."""
    status, _, rest = message.partition(" ")
    if status not in _STYLE:
        status, rest = "", message
    body = html.escape(rest)
    if status:
        colour, mark = _STYLE[status]
        badge = (
            f'<span style="color:white;background:{colour};font-weight:bold;'
            f'padding:0 0.4em;border-radius:3px">{mark} {status}</span> '
        )
        body = badge + body
    style = "font-family:var(--jp-code-font-family,monospace);white-space:pre-wrap"
    return f'<div class="labsupport-check" style="{style}">{body}</div>'


def _display(message: str) -> None:
    """Show ``message`` as coloured HTML in a notebook, with the plain text alongside
    (what nbval compares and what a terminal shows); plain ``print`` outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the course
        get_ipython = None  # type: ignore[assignment]
    shell = get_ipython() if get_ipython else None
    if shell is None or not hasattr(shell, "kernel"):
        print(message, flush=True)
        return
    from IPython.display import display

    display({"text/plain": message, "text/html": as_html(message)}, raw=True)


def report(passed: bool, message: str, implemented: bool = True) -> CheckResult:
    """Show ``message`` (what the learner reads) and return it as a :class:`CheckResult`.

    Start ``message`` with :data:`PASS`, :data:`FAIL` or :data:`TODO` and a space: in a
    notebook that word is shown coloured.
    """
    _display(message)
    return CheckResult(passed, message, implemented)


def explain_failure(
    err: Exception,
    name: str,
    timeout: float,
    *,
    context: str = "",
    hints: dict[str, str] | None = None,
) -> CheckResult:
    """Report a check whose run ended in a ``RankError`` or ``CollectiveTimeout``.

    A stub (``NotImplementedError``) is "not implemented yet"; another error names
    the rank that failed first and the line of *your* code; a timeout lists where
    each rank was waiting. ``context`` is added after the rank (e.g. " (of 4 ranks)");
    ``hints`` maps an exception type name, or ``"timeout"``, to advice added at the end.
    """
    from labsupport.launch import CollectiveTimeout

    hints = hints or {}
    if isinstance(err, CollectiveTimeout):
        lines = [
            f"{FAIL} {name} did not finish within {err.timeout:g} s{context}: a deadlock? "
            "The ranks were restarted. Where each rank was waiting:",
            *(f"  rank {r}: {_where(stack)}" for r, stack in err.stacks.items()),
        ]
        return report(False, _with_hint(lines, hints.get("timeout")))
    first = err.errors[err.first]  # the root cause, not a bystander
    if first.type_name == "NotImplementedError":
        return _not_implemented(name)
    lines = [
        f"{FAIL} {name} raised {first.type_name} on rank {err.first}{context}: {first.message}",
        f"  at {_where(first.traceback)}",
    ]
    return report(False, _with_hint(lines, hints.get(first.type_name)))


def _with_hint(lines: list[str], hint: str | None) -> str:
    """The lines of a message, and the hint (if any) on a line of its own."""
    if hint:
        lines.append("  " + " ".join(hint.split()))
    return "\n".join(lines)


def _not_implemented(name: str) -> CheckResult:
    return report(
        False,
        f"{TODO} {name} is not implemented yet.\n"
        "  Replace the `raise NotImplementedError` line with your code, run that cell "
        "again, then this one.",
        implemented=False,
    )


_FRAME = re.compile(
    r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>\S+)(?:\n {4}(?P<src>.+))?'
)


def _where(stack: str) -> str:
    """The innermost line of *your* code in a traceback or stack, e.g. "line 8 in exchange"."""
    frames = list(_FRAME.finditer(stack))
    if not frames:
        return "(no stack)"
    library = ("torch/", "torch\\", "labsupport/", "labsupport\\")
    mine = [f for f in frames if not any(part in f["file"] for part in library)]
    frame = (mine or frames)[-1]
    text = f"line {frame['line']} in {frame['func']}"
    if frame["src"]:
        text += f": `{frame['src'].strip()}`"
    if frame is not frames[-1]:
        text += f", waiting in {frames[-1]['func']}"
    return text


# --------------------------------------------------------------------- graders


@contextlib.contextmanager
def cluster_for_check(cluster: Any = None, world_size: int | None = None) -> Iterator[Any]:
    """The cluster a check runs on: ``cluster``, else the running one (``%%ranks``'s) if its
    size fits ``world_size``, else a temporary one of ``world_size`` (default 4) ranks."""
    from labsupport.launch import Cluster, current_cluster

    owned = None
    if cluster is None:
        cluster = current_cluster()
        if cluster is None or (world_size is not None and cluster.world_size != world_size):
            cluster = owned = Cluster(world_size=world_size or 4)
    try:
        yield cluster
    finally:
        if owned is not None:
            owned.shutdown()


def _trial(fn: Callable, reference: Callable, make_args: Callable) -> tuple[Any, Any]:
    """On one rank: the reference's result, then the learner's (the learner's runs last,
    so a wrong sequence of collectives cannot spoil the reference)."""
    import torch.distributed as dist

    args = make_args(dist.get_rank(), dist.get_world_size())
    expected = _to_cpu(reference(*copy.deepcopy(args)))
    dist.barrier()
    got = _to_cpu(fn(*copy.deepcopy(args)))
    return expected, got


def check_on_ranks(
    fn: Callable,
    reference: Callable,
    make_args: Callable[[int, int], tuple],
    *,
    name: str = "Your function",
    cluster: Any = None,
    world_size: int | None = None,
    timeout: float = 30.0,
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    hints: dict[str, str] | None = None,
) -> CheckResult:
    """Run ``reference`` and ``fn`` on every rank with ``make_args(rank, world_size)``; compare.

    ``hints`` maps an exception type name, or ``"timeout"``, to one line of advice added
    when the run ends that way (see :func:`explain_failure`).

    ``cluster``: the Cluster to use; by default the running one (``%%ranks``'s), or a
    temporary one of ``world_size`` (default 4) ranks. A cluster of another size than
    ``world_size`` is not reused.
    """
    from labsupport.launch import CollectiveTimeout, RankError

    try:
        with cluster_for_check(cluster, world_size) as running:
            results = running.call(_trial, (fn, reference, make_args), timeout=timeout)
    except (RankError, CollectiveTimeout) as err:
        return explain_failure(err, name, timeout, hints=hints)
    differences = {
        rank: describe_difference(expected, got, exact=exact, rtol=rtol, atol=atol)
        for rank, (expected, got) in enumerate(results)
    }
    wrong = {rank: text for rank, text in differences.items() if text}
    if wrong:
        return report(False, per_rank_message(name, wrong, len(results)))
    return report(True, f"{PASS} {name}: matches the reference on all {len(results)} ranks.")


def per_rank_message(name: str, wrong: dict[int, str], world_size: int) -> str:
    """A FAIL message: which ranks are wrong on its first line, then one line per rank."""
    ranks = ", ".join(map(str, wrong))
    where = f"every rank ({world_size})" if len(wrong) == world_size else f"rank {ranks}"
    lines = [f"{FAIL} {name}: wrong on {where} of {world_size}."]
    lines += [f"  rank {rank}: {text}" for rank, text in wrong.items()]
    return "\n".join(lines)


def check_function(
    fn: Callable,
    reference: Callable,
    cases: Sequence[tuple],
    *,
    name: str = "Your function",
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> CheckResult:
    """Call ``fn(*case)`` and ``reference(*case)`` here (no ranks) for each case; compare."""
    for case in cases:
        try:
            got = fn(*copy.deepcopy(case))
        except NotImplementedError:
            return _not_implemented(name)
        except Exception as exc:  # the learner's bug, reported kindly
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return report(
                False,
                f"{FAIL} {name}{_short(tuple(case))} raised {type(exc).__name__}: {exc}\n"
                f"  at line {where.lineno}: `{where.line}`",
            )
        expected = reference(*copy.deepcopy(case))
        difference = describe_difference(expected, got, exact=exact, rtol=rtol, atol=atol)
        if difference:
            return report(False, f"{FAIL} {name}{_short(tuple(case))}: {difference}")
    return report(True, f"{PASS} {name}: right on all {len(cases)} cases.")


def check_values(
    predicted: Callable[[], Any] | Any,
    actual: Sequence[Any],
    *,
    name: str = "Your prediction",
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> CheckResult:
    """Compare per-rank ``actual`` values with ``predicted`` (a list, or a function giving one)."""
    if callable(predicted):
        try:
            predicted = predicted()
        except NotImplementedError:
            return _not_implemented(name)
    if not isinstance(predicted, list | tuple) or len(predicted) != len(actual):
        return report(
            False,
            f"{FAIL} {name}: expected one entry per rank ({len(actual)}), got {_short(predicted)}",
        )
    wrong = {}
    for rank, (want, got) in enumerate(zip(actual, predicted, strict=True)):
        if isinstance(want, torch.Tensor) and not isinstance(got, torch.Tensor):
            try:  # a plain list is a fine prediction
                got = torch.as_tensor(got, dtype=want.dtype)
            except (TypeError, ValueError, RuntimeError):
                pass
        difference = describe_difference(
            want, got, exact=exact, rtol=rtol, atol=atol, words=("the ranks hold", "you said")
        )
        if difference:
            wrong[rank] = difference
    if wrong:
        return report(False, per_rank_message(name, wrong, len(actual)))
    return report(True, f"{PASS} {name}: right on all {len(actual)} ranks.")
