"""The exceptions a cell on N ranks can end with, and the messages they carry."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from traceback import FrameSummary
from typing import Any

import cloudpickle

from labsupport.runtime.language import _
from labsupport.runtime.launch.frames import parse_frames

#: Lines of an error message are wrapped at this many characters (at spaces), so that
#: "RankError: " and the message fit the 122 columns a notebook shows at 1400 px
#: (tests/course/test_stored_outputs.py) and nothing is broken mid-word.
MESSAGE_WIDTH = 100


@dataclass(frozen=True)
class RemoteError:
    """An exception raised on one rank, carried back as text."""

    rank: int
    type_name: str
    message: str
    traceback: str

    @property
    def frames(self) -> list[FrameSummary]:
        """The traceback as frame records, outermost first."""
        return parse_frames(self.traceback)


class LabError(RuntimeError):
    """Base class of the launcher's errors."""

    @property
    def frames(self) -> dict[int, list[FrameSummary]]:
        """Each rank's stack (``stacks``) as frame records, outermost first."""
        stacks: dict[int, str] = getattr(self, "stacks", {})
        return {rank: parse_frames(stack) for rank, stack in stacks.items()}


class RankError(LabError):
    """One or more ranks raised (or died) while running a cell.

    ``errors`` maps each failing rank to its :class:`RemoteError`; ``first`` is
    the rank whose failure came first (a rank that died counts first), since
    the others often fail *because* of it (their peer went away).
    ``stacks`` holds the Python stack of ranks that were still blocked
    (usually waiting in a collective for the rank that failed).
    """

    def __init__(
        self,
        errors: dict[int, RemoteError],
        stacks: dict[int, str] | None = None,
        restarted: bool = False,
        first: int | None = None,
        note: str | None = None,
    ) -> None:
        self.errors = dict(sorted(errors.items()))
        self.stacks = dict(sorted((stacks or {}).items()))
        self.restarted = restarted
        self.ranks = list(self.errors)
        self.first = first if first in self.errors else self.ranks[0]
        super().__init__(self._describe() + (f"\n\n({note})" if note else ""))

    def _describe(self) -> str:
        first = self.errors[self.first]
        summary = _summary(first.message)
        parts = [
            _wrap(
                _("rank {rank} raised {type}: {summary}").format(
                    rank=first.rank, type=first.type_name, summary=summary
                )
            )
        ]
        # The other failing ranks: one line per kind of error, with one example.
        by_type: dict[str, list[int]] = {}
        for rank, err in self.errors.items():
            if rank != self.first:
                by_type.setdefault(err.type_name, []).append(rank)
        for type_name, ranks in by_type.items():
            names = _ranks(ranks)
            example = _summary(self.errors[ranks[0]].message, limit=120)
            if type_name == first.type_name and example == _summary(first.message, 120):
                parts.append(_("({who}: the same error)").format(who=names))
            else:
                also = _("({who} also raised {type}, e.g. rank {rank}: {example})")
                parts.append(
                    _wrap(also.format(who=names, type=type_name, rank=ranks[0], example=example))
                )
        traceback = _wrap(first.traceback.rstrip())
        heading = _("--- rank {rank}: remote traceback ---").format(rank=first.rank)
        parts.append(f"\n{heading}\n{traceback}")
        for ranks, stack in _same_stacks(self.stacks):
            if len(ranks) == 1:
                heading = _("--- {who} was still blocked here ---").format(who=_ranks(ranks))
            else:
                heading = _("--- {who} were still blocked here ---").format(who=_ranks(ranks))
            parts.append(f"\n{heading}\n{stack}")
        return "\n".join(parts)


def _ranks(ranks: list[int]) -> str:
    """``"rank 2"`` or ``"ranks 0, 1, 3"``."""
    listed = ", ".join(str(r) for r in ranks)
    if len(ranks) > 1:
        return _("ranks {ranks}").format(ranks=listed)
    return _("rank {ranks}").format(ranks=listed)


def _same_stacks(stacks: dict[int, str]) -> list[tuple[list[int], str]]:
    """The ranks' stacks, each distinct stack once with the ranks that show it (rank order)."""
    groups: dict[str, list[int]] = {}
    for rank, stack in sorted(stacks.items()):
        groups.setdefault(stack.rstrip(), []).append(rank)
    return [(ranks, stack) for stack, ranks in groups.items()]


def _wrap(text: str, width: int = MESSAGE_WIDTH) -> str:
    """``text`` with each line longer than ``width`` wrapped at spaces, keeping its indent."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out)


#: torch's TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch message puts what differs at its very end,
#: after two long fingerprints: the summary line keeps that part.
_DIFFERS = "Collectives differ in the following aspects:"


def _summary(text: str, limit: int = 200) -> str:
    """The line that says what went wrong: the first line, or for a DETAIL mismatch what differs.

    ``"Detected mismatch between collectives on ranks. Rank 0 is running collective:
    CollectiveFingerPrint(...), but Rank 1 ... .Collectives differ in the following aspects:
    \tTensor Tensor shapes: 2vs 3"`` becomes ``"Detected mismatch between collectives on
    ranks: Tensor shapes: 2 vs 3"``.
    """
    head, found, differs = text.partition(_DIFFERS)
    if not found:
        return _first_line(text, limit)
    what = " ".join(differs.split()).replace("Tensor Tensor", "Tensor")
    what = re.sub(r"(\S)vs\b", r"\1 vs", what)  # torch prints "2vs 3"
    return _first_line(f"{head.split('. ')[0].rstrip('.')}: {what}", limit)


def _first_line(text: str, limit: int = 200) -> str:
    """The first line of an error message, cut to ``limit`` characters."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class CollectiveTimeout(LabError, TimeoutError):
    """A cell did not finish on every rank within the timeout (a hang, often a deadlock).

    ``stacks`` maps each blocked rank to its Python stack at the moment of the
    timeout, so you can see where it waits (``dist.recv``, ``all_reduce`` ...).
    """

    def __init__(
        self,
        timeout: float,
        stacks: dict[int, str],
        restarted: bool = True,
        note: str | None = None,
    ) -> None:
        self.timeout = timeout
        self.stacks = dict(sorted(stacks.items()))
        self.ranks = list(self.stacks)
        self.restarted = restarted
        parts = [
            _(
                "{who} did not finish within {timeout:g} s: each rank's stack shows where it\n"
                "is blocked (a rank waiting for a peer that never sends is a deadlock)."
            ).format(who=_ranks(self.ranks), timeout=timeout)
        ]
        for ranks, stack in _same_stacks(self.stacks):
            if len(ranks) > 1:
                heading = _("--- {who} stack (the same on each) ---").format(who=_ranks(ranks))
            else:
                heading = _("--- {who} stack ---").format(who=_ranks(ranks))
            parts.append(f"\n{heading}\n{stack}")
        if note:
            parts.append(f"\n({note})")
        super().__init__("\n".join(parts))


class CellInterrupted(LabError, KeyboardInterrupt):
    """The stop button: every rank was interrupted (and restarted if it did not stop).

    ``stacks`` maps each rank that did not stop to where it was stuck.
    """

    def __init__(
        self,
        stacks: dict[int, str] | None = None,
        restarted: bool = False,
        message: str | None = None,
    ) -> None:
        self.stacks = dict(sorted((stacks or {}).items()))
        self.restarted = restarted
        if message is not None:
            text = message
        elif not restarted:
            text = _(
                "interrupted on every rank; the ranks keep their state (a message sent but "
                "not yet received stays queued: %ranks restart clears it)"
            )
        else:
            if self.stacks:
                text = _(
                    "interrupted; ranks {ranks} did not stop, so every rank was restarted "
                    "(names defined in earlier cells are gone)"
                ).format(ranks=", ".join(str(r) for r in self.stacks))
            else:
                text = _(
                    "interrupted; some ranks did not stop, so every rank was restarted "
                    "(names defined in earlier cells are gone)"
                )
            for rank, stack in self.stacks.items():
                heading = _("--- rank {rank} was stuck here ---").format(rank=rank)
                text += f"\n\n{heading}\n{stack.rstrip()}"
        super().__init__(text)


class ClusterStopped(LabError):
    """A cluster was used after ``shutdown()``."""


def _pickles(obj: object) -> bool:
    try:
        cloudpickle.dumps(obj)
    except Exception:
        return False
    return True


def unpicklable_call(
    fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], exc: Exception
) -> TypeError:
    """A clear error for a function or argument that cannot travel to the ranks."""
    culprits = [
        f"argument {i + 1} ({type(a).__name__})" for i, a in enumerate(args) if not _pickles(a)
    ]
    culprits += [f"keyword {k}= ({type(v).__name__})" for k, v in kwargs.items() if not _pickles(v)]
    if not _pickles(fn):
        names = _unpicklable_names(fn)
        what = f"the function {getattr(fn, '__qualname__', repr(fn))}"
        culprits.append(what + (f", through {', '.join(names)}" if names else ""))
    return TypeError(
        f"cannot send {' and '.join(culprits) or 'the call'} to the ranks: it cannot be pickled "
        f"({type(exc).__name__}: {exc}). Functions travel to the ranks by value, with every "
        "name they use; create locks, files, sockets or clusters inside the function instead "
        "of capturing them, or pass plain data (numbers, strings, tensors)."
    )


def _unpicklable_names(fn: Callable[..., Any]) -> list[str]:
    """The names ``fn`` uses (closure cells, globals) whose values cannot be pickled."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    names = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if not _pickles(value):
            names.append(f"{name} ({type(value).__name__})")
    fn_globals = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in fn_globals and not _pickles(fn_globals[name]):
            names.append(f"{name} ({type(fn_globals[name]).__name__})")
    return names
