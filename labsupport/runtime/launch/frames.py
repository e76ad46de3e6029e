"""Stack frames as data: read once from a rank's stack or traceback, described in one place.

A rank's stack reaches the kernel as text (``err.stacks``, a formatted traceback in
``RankError``), the form a learner reads and the grader's plain-data channel carries.
:func:`parse_frames` turns that text into :class:`traceback.FrameSummary` records
(file, line number, function, source line); :func:`format_frames` writes records back
as a traceback; :func:`user_frame` finds the innermost line of *your* code, and
:func:`where` says it in words ("line 8 in exchange: `dist.recv(t, src)`, waiting in
recv"). The checks, :mod:`labsupport.runtime.diagnose` and :mod:`labsupport.runtime.viz.waitfor` all
read stacks through these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from traceback import FrameSummary

#: One frame of a formatted traceback or stack, with its source line if shown.
_FRAME = re.compile(
    r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>\S+)(?:\n {4}(?P<src>.+))?'
)
#: Frames in these folders are the library's, not the learner's.
LIBRARY = ("torch/", "torch\\", "labsupport/", "labsupport\\")


def frame(filename: str, lineno: int, name: str, source: str = "") -> FrameSummary:
    """A frame record, with ``source`` as its line (no lookup in the file)."""
    return FrameSummary(filename, lineno, name, lookup_line=False, line=source)


def parse_frames(text: str) -> list[FrameSummary]:
    """The frames of a formatted traceback or stack, outermost first."""
    return [
        frame(m["file"], int(m["line"]), m["func"], (m["src"] or "").strip())
        for m in _FRAME.finditer(text)
    ]


def format_frames(frames: Sequence[FrameSummary]) -> str:
    """``Stack (most recent call last):`` and the frames, as a traceback shows them."""
    lines = [
        f'  File "{f.filename}", line {f.lineno}, in {f.name}'
        + (f"\n    {f.line}" if f.line else "")
        for f in frames
    ]  # not traceback.format_list, which folds repeated frames (a recursion's)
    return "Stack (most recent call last):\n" + "\n".join(lines)


def is_library(f: FrameSummary) -> bool:
    """True for a frame of torch or labsupport (not the learner's code)."""
    return any(part in f.filename for part in LIBRARY)


def _frames(stack: str | Sequence[FrameSummary]) -> list[FrameSummary]:
    return parse_frames(stack) if isinstance(stack, str) else list(stack)


def user_frame(
    stack: str | Sequence[FrameSummary],
) -> tuple[FrameSummary, FrameSummary] | None:
    """(the innermost frame of *your* code, the innermost frame) of a traceback or stack.

    Frames in torch and labsupport are not yours; when every frame is, or none is, the
    innermost one is taken. None when the stack holds no frame at all.
    """
    frames = _frames(stack)
    if not frames:
        return None
    mine = [f for f in frames if not is_library(f)]
    return (mine or frames)[-1], frames[-1]


def where(
    stack: str | Sequence[FrameSummary],
    *,
    function: bool = True,
    code: str = "`{}`",
    waiting: str = ", waiting in {}",
) -> str:
    """The innermost line of *your* code in a stack, and the call it waits in, in words.

    "line 8 in exchange: `dist.recv(t, src)`, waiting in recv"; without ``function``,
    "line 8 `dist.recv(t, src)`, waiting in recv". ``code`` and ``waiting`` shape the
    source and the call; "(no stack)" when there is no frame.
    """
    found = user_frame(stack)
    if found is None:
        return "(no stack)"
    mine, innermost = found
    text = f"line {mine.lineno}" + (f" in {mine.name}" if function else "")
    if mine.line:
        text += (": " if function else " ") + code.format(mine.line)
    if mine is not innermost:
        text += waiting.format(innermost.name)
    return text
