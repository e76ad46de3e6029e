"""A one-line progress bar on stderr, only for a person watching a terminal.

Off when stderr is not a terminal (CI logs, nbval, notebooks, pipes) or when
the ``CI`` environment variable is set, so logs stay clean.
"""

from __future__ import annotations

import os
import sys
from typing import IO


def interactive(stream: IO[str] | None = None) -> bool:
    """True when ``stream`` (stderr by default) is a terminal and this is not CI."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """``[#####.....] 5/10 sizes  all_reduce 64K`` redrawn in place; silent when disabled."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: IO[str] | None = None,
        enabled: bool | None = None,
        width: int = 30,
    ) -> None:
        self.total, self.label, self.width, self.done = total, label, width, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = interactive(self.stream) if enabled is None else enabled

    def _write(self, text: str) -> None:
        if self.enabled:
            self.stream.write(text)
            self.stream.flush()

    def draw(self, note: str = "") -> None:
        """Draw the bar with an optional note (e.g. the size being measured)."""
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        self._write(f"\r\x1b[K{self.label} [{bar}] {self.done}/{self.total} {note}")

    def clear(self) -> None:
        """Erase the bar (before printing a table line on the same terminal)."""
        self._write("\r\x1b[K")

    def advance(self, note: str = "") -> None:
        """One more step done; redraw."""
        self.done += 1
        self.draw(note)

    def close(self) -> None:
        """Erase the bar for good."""
        self.clear()
