"""Showing each rank's output in the notebook, every line prefixed ``[rank N]``.

A cell that ends quickly shows its output grouped by rank, in rank order (the
easiest to read). A cell still running after :data:`LIVE_AFTER_S` switches to
live output, as ``%%px --stream`` does: whole lines are printed as they arrive,
so a training loop shows its progress. Output beyond a cell's bound is shown
as head, one line saying how much was left out, and tail.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import Any, TextIO

from labsupport.runtime.launch.output import Captured, StreamReader

#: A cell running longer than this shows its output live. $LABSUPPORT_LIVE_AFTER
#: (seconds, or "inf") overrides it: stored notebook outputs and nbval use "inf",
#: so that what a cell prints does not depend on how fast the machine was.
LIVE_AFTER_S = 1.0


#: Lines are wrapped at spaces to this width, prefix included: what JupyterLab shows
#: on one line at 1400 px (tests/course/test_stored_outputs.py), so it never breaks a word.
WIDTH = 122
#: The header of a line of torch's C++ log: ``[rank0]:[E1130 08:51:49.089291591 File.cpp:67] ``.
_CPP_LOG = re.compile(r"^(?:\[rank\d+\]:)?\[([EWIF])\d{4} (\d\d:\d\d:\d\d)\.\d+ ([\w.]+:\d+)\] ")


def prefix_lines(rank: int, text: str) -> str:
    """``text`` with every line prefixed ``[rank N] ``, and wrapped at spaces to :data:`WIDTH`.

    A line of torch's C++ log keeps its level, time and source line and drops what the
    prefix already says (the rank) or nobody reads (the date, the nanoseconds):
    ``[E 08:51:49 ProcessGroupGloo.cpp:67] message``.
    """
    if not text:
        return ""
    prefix = f"[rank {rank}] "
    out = []
    for line in text.splitlines():
        line = _CPP_LOG.sub(r"[\1 \2 \3] ", line)
        if len(prefix) + len(line) <= WIDTH:
            out.append(prefix + line + "\n")
            continue
        lead = line[: len(line) - len(line.lstrip())]
        pieces = textwrap.wrap(
            line.lstrip(),
            WIDTH - len(prefix),
            initial_indent=lead,
            subsequent_indent=lead + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        out += [prefix + piece + "\n" for piece in pieces or [line]]
    return "".join(out)


class RankPrinter:
    """Prints one cell's output of every rank (``show``: the ranks to print, None for all)."""

    def __init__(
        self,
        readers: Sequence[tuple[StreamReader, StreamReader]],
        show: list[int] | None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.readers = readers
        self.show = show
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.started = time.monotonic()
        self.live_after = float(os.environ.get("LABSUPPORT_LIVE_AFTER", LIVE_AFTER_S))
        self.live = False
        # Output taken from the readers but not printed yet: (rank, pipe) -> text.
        self._held: dict[tuple[int, int], str] = {}

    def _shown(self, rank: int) -> bool:
        return self.show is None or rank in self.show

    def poll(self) -> None:
        """Print the whole lines that arrived, once the cell has run long enough."""
        if not self.live and time.monotonic() - self.started < self.live_after:
            return
        self.live = True
        for rank, pipes in enumerate(self.readers):
            for pipe, reader in enumerate(pipes):
                text = self._held.pop((rank, pipe), "") + reader.take_fresh()
                cut = text.rfind("\n") + 1
                if cut:
                    self._write(rank, pipe, text[:cut])
                if text[cut:]:
                    self._held[(rank, pipe)] = text[cut:]

    def finish(self, task_id: int, finished: set[int]) -> None:
        """Print the rest, rank by rank; ``finished``: the ranks that ended the cell."""
        for rank, pipes in enumerate(self.readers):
            for pipe, reader in enumerate(pipes):
                captured = reader.collect(task_id, everything=rank not in finished)
                held = self._held.pop((rank, pipe), "")
                self._write_captured(rank, pipe, Captured(held) + captured)
        self.stdout.flush()

    def _write_captured(self, rank: int, pipe: int, captured: Captured) -> None:
        if not captured.left_out:
            self._write(rank, pipe, captured.head + captured.tail)
            return
        head = captured.head if captured.head.endswith("\n") else captured.head + "\n"
        cut, nl, tail = captured.tail.partition("\n")  # start the tail on a whole line
        if not nl:
            cut, tail = "", captured.tail
        left_out = captured.left_out + len(cut.encode("utf-8", "replace")) + len(nl)
        note = (
            f"... {left_out:,} bytes left out (the cell printed more than the "
            "launcher keeps: the head and the tail are shown) ...\n"
        )
        self._write(rank, pipe, head + note + tail)

    def _write(self, rank: int, pipe: int, text: str) -> None:
        if not text or not self._shown(rank):
            return
        if pipe == 0:
            self.stdout.write(prefix_lines(rank, text))
            if self.live:
                self.stdout.flush()
        else:
            self.stdout.flush()
            self.stderr.write(prefix_lines(rank, text))
            self.stderr.flush()


def display_figures(replies: dict[int, Any], show: list[int] | None) -> None:
    """Show the figures ranks left open, in rank order (only inside IPython)."""
    figures = [
        png
        for rank, rep in sorted(replies.items())
        for png in rep.figures
        if show is None or rank in show
    ]
    if not figures:
        return
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is None:
        return
    for png in figures:
        display(Image(data=png, format="png"))
