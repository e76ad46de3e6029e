"""What a check says: PASS / FAIL / TODO as words, per-rank lines, and how two values differ.

The status word stays English in every language (the HTML badge, the tests and a
translated notebook's stored outputs recognise a grader's message by it); what follows it
is translated (:mod:`labsupport.runtime.language`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import torch

from labsupport.runtime.language import N_, _
from labsupport.runtime.launch.frames import where

PASS = "PASS"
FAIL = "FAIL"
TODO = "TODO"
#: A grader's problem said of one answer (a class, or a class with its arguments).
# translators: {label} is the learner's class or function, e.g. MyBucketed(bucket_cap_mb=0.001)
LABELLED = N_("{label}: {problem}")
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


def short_repr(value: Any, limit: int = 160) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters."""
    text = repr(value).replace("\n", " ")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tensor_difference(
    expected: torch.Tensor, got: Any, exact: bool, rtol: float, atol: float, words: tuple[str, str]
) -> str | None:
    want, have = words
    if not isinstance(got, torch.Tensor):
        return _("{want} a tensor {expected}, {have} {type} {got}").format(
            want=want, expected=short_repr(expected), have=have, type=type(got).__name__,
            got=short_repr(got),
        )  # fmt: skip
    if got.shape != expected.shape:
        return _(
            "{want} shape {expected_shape}, {have} shape {got_shape} "
            "({want} {expected}, {have} {got})"
        ).format(
            want=want, have=have, expected_shape=tuple(expected.shape),
            got_shape=tuple(got.shape), expected=short_repr(expected), got=short_repr(got),
        )  # fmt: skip
    if got.dtype != expected.dtype:
        return _("{want} dtype {expected_dtype}, {have} {got_dtype} ({got})").format(
            want=want, have=have, expected_dtype=expected.dtype, got_dtype=got.dtype,
            got=short_repr(got),
        )  # fmt: skip
    got, expected = got.detach().cpu(), expected.detach().cpu()
    if exact or not expected.dtype.is_floating_point:
        same = got == expected
    else:
        same = torch.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bool(same.all()):
        return None
    first = tuple(int(i) for i in (~same).nonzero()[0])
    where = first[0] if len(first) == 1 else first
    return _(
        "{want} {expected}, {have} {got} (first difference at index {index}: "
        "{want} {expected_item}, {have} {got_item})"
    ).format(
        want=want, have=have, expected=short_repr(expected), got=short_repr(got), index=where,
        expected_item=expected[first].item(), got_item=got[first].item(),
    )  # fmt: skip


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, int | float | str | bool)


def describe_difference(
    expected: Any,
    got: Any,
    *,
    exact: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    words: tuple[str, str] = (N_("expected"), N_("got")),
) -> str | None:
    """None if ``got`` matches ``expected``; otherwise one sentence saying what differs.

    ``words`` name the two sides in the sentence (e.g. ``("the ranks hold", "you said")``;
    mark them with ``N_``: they are translated here).
    """
    want, have = _(words[0]), _(words[1])
    options = {"exact": exact, "rtol": rtol, "atol": atol, "words": words}
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(expected, got, exact, rtol, atol, (want, have))
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return _("{want} a {type} of {count}, {have} {got}").format(
                want=want, type=type(expected).__name__, count=len(expected), have=have,
                got=short_repr(got),
            )  # fmt: skip
        if len(got) != len(expected):
            return _("{want} {expected_count} items, {have} {got_count}: {got}").format(
                want=want, expected_count=len(expected), have=have, got_count=len(got),
                got=short_repr(got),
            )  # fmt: skip
        if all(_is_scalar(x) for x in [*expected, *got]):  # short lists read best whole
            pairs = zip(expected, got, strict=True)
            same = all(describe_difference(e, g, **options) is None for e, g in pairs)
            return None if same else _pair(want, expected, have, got)
        for index, (e, g) in enumerate(zip(expected, got, strict=True)):
            difference = describe_difference(e, g, **options)
            if difference:
                return _("item {index}: {difference}").format(index=index, difference=difference)
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return _("{want} a dict with keys {keys}, {have} {got}").format(
                want=want, keys=sorted(expected), have=have, got=short_repr(got)
            )
        for key in expected:
            difference = describe_difference(expected[key], got[key], **options)
            if difference:
                return f"[{key!r}]: {difference}"
        return None
    if isinstance(got, torch.Tensor):
        return _("{want} {expected}, {have} a tensor {got}").format(
            want=want, expected=short_repr(expected), have=have, got=short_repr(got)
        )
    if isinstance(expected, float) and isinstance(got, int | float) and not exact:
        close = abs(got - expected) <= atol + rtol * abs(expected)
        return None if close else _pair(want, expected, have, got, shorten=False)
    return None if got == expected else _pair(want, expected, have, got)


def _pair(want: str, expected: Any, have: str, got: Any, shorten: bool = True) -> str:
    """The two values, each named by its side: "expected 3, got 4"."""
    show = short_repr if shorten else repr
    return _("{want} {expected}, {have} {got}").format(
        want=want, expected=show(expected), have=have, got=show(got)
    )


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
    from labsupport.runtime.launch import CollectiveTimeout

    hints = hints or {}
    name, context = _(name), _(context)
    if isinstance(err, CollectiveTimeout):
        lines = [
            f"{FAIL} "
            + _(
                "{name} did not finish within {timeout:g} s{context}: a deadlock? "
                "The ranks were restarted. Where each rank was waiting:"
            ).format(name=name, timeout=err.timeout, context=context),
            *(rank_line(r, where(stack)) for r, stack in err.stacks.items()),
        ]
        return report(False, _with_hint(lines, hints.get("timeout")))
    first = err.errors[err.first]  # the root cause, not a bystander
    if first.type_name == "NotImplementedError":
        return not_implemented(name)
    lines = [
        f"{FAIL} "
        + _("{name} raised {type} on rank {rank}{context}: {error}").format(
            name=name, type=first.type_name, rank=err.first, context=context, error=first.message
        ),
        _("  at {where}").format(where=where(first.traceback)),
    ]
    return report(False, _with_hint(lines, hints.get(first.type_name)))


def rank_line(rank: int, detail: str) -> str:
    """One indented line of a message about one rank: "  rank 2: expected 3, got 4"."""
    return _("  rank {rank}: {detail}").format(rank=rank, detail=detail)


def _with_hint(lines: list[str], hint: str | None) -> str:
    """The lines of a message, and the hint (if any, translated) on a line of its own."""
    if hint:
        lines.append("  " + " ".join(_(hint).split()))
    return "\n".join(lines)


def not_implemented(name: str) -> CheckResult:
    """The result of a check whose stub still raises ``NotImplementedError``."""
    return report(
        False,
        f"{TODO} "
        + _(
            "{name} is not implemented yet.\n"
            "  Replace the `raise NotImplementedError` line with your code, run that cell "
            "again, then this one."
        ).format(name=_(name)),
        implemented=False,
    )


def per_rank_message(name: str, wrong: dict[int, str], world_size: int) -> str:
    """A FAIL message: which ranks are wrong on its first line, then one line per rank."""
    if len(wrong) == world_size:
        first = _("{name}: wrong on all {world_size} ranks.")
    else:
        first = _("{name}: wrong on rank {ranks} of {world_size}.")
    ranks = ", ".join(map(str, wrong))
    lines = [f"{FAIL} " + first.format(name=_(name), ranks=ranks, world_size=world_size)]
    lines += [rank_line(rank, text) for rank, text in wrong.items()]
    return "\n".join(lines)
