"""Reading what one rank prints: one :class:`StreamReader` per pipe, bounded.

Each worker's stdout and stderr are pipes that a reader thread drains, so
C-level output (from gloo, HCCL, a C extension) is caught as well as Python's
``print``. The worker ends each request's output with a marker line, so the
reader can tell which cell a piece of output belongs to.

The reader keeps memory bounded: of each cell's output it keeps the head
(handed out as it arrives, so it can be shown live) and the tail (shown when
the cell ends), and only counts the bytes in between. Bytes are decoded with
an incremental UTF-8 decoder, so a character cut by a read boundary is kept.
The reader owns its file descriptor and closes it itself at end of file, so a
descriptor number is never read after someone else reuses it.
"""

from __future__ import annotations

import codecs
import os
import re
import threading
from collections import deque
from dataclasses import dataclass

_MARKER = re.compile("\n?\x1eLABSUPPORT-END-(\\d+)\x1e\n")
_MARKER_MAX = 40  # longer than any marker: a held-back "\x1e..." beyond this is plain output


@dataclass
class Captured:
    """One cell's output from one pipe: the head, how much was left out, the tail."""

    head: str = ""
    left_out: int = 0  # bytes (UTF-8) between head and tail that were dropped
    tail: str = ""

    def __add__(self, other: Captured) -> Captured:
        if not self.left_out and not self.tail:
            return Captured(self.head + other.head, other.left_out, other.tail)
        return Captured(
            self.head, self.left_out + other.left_out, self.tail + other.head + other.tail
        )


class _Segment:
    """The output of one cell as it arrives; ``limit`` is its head and tail budget."""

    def __init__(self) -> None:
        self.fresh: list[str] = []  # head text not handed out yet
        self.head_used = 0
        self.tail: deque[str] = deque()
        self.tail_len = 0
        self.left_out = 0

    def add(self, text: str, limit: int) -> None:
        if not text:
            return
        room = max(0, limit // 2 - self.head_used)
        if room:
            head, text = text[:room], text[room:]
            self.fresh.append(head)
            self.head_used += len(head)
        if not text:
            return
        self.tail.append(text)
        self.tail_len += len(text)
        keep = limit - limit // 2
        while self.tail_len > keep:
            extra = self.tail_len - keep
            first = self.tail[0]
            cut = first if len(first) <= extra else first[:extra]
            if cut is first:
                self.tail.popleft()
            else:
                self.tail[0] = first[extra:]
            self.tail_len -= len(cut)
            self.left_out += len(cut.encode("utf-8", "replace"))

    def take_fresh(self) -> str:
        text = "".join(self.fresh)
        self.fresh.clear()
        return text

    def close(self) -> Captured:
        return Captured(self.take_fresh(), self.left_out, "".join(self.tail))


class StreamReader:
    """Drains one pipe of one rank in a background thread; owns and closes ``fd``."""

    def __init__(self, fd: int, name: str, limit: int = 1_000_000) -> None:
        self._fd = fd
        self.limit = limit  # characters kept per cell (half head, half tail)
        self._current = _Segment()
        self._finished: list[tuple[int, Captured]] = []  # (task id, output), oldest first
        self._pending = ""  # text that may be the start of a marker cut in two
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._drain, name=name, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 65536)
                except OSError:
                    chunk = b""
                self._feed(decoder.decode(chunk, final=not chunk))
                if not chunk:
                    break
        finally:
            os.close(self._fd)
            with self._cond:
                self._current.add(self._pending, self.limit)
                self._pending = ""
                self._finished.append((-1, self._current.close()))
                self._current = _Segment()
                self._closed = True
                self._cond.notify_all()

    def _feed(self, text: str) -> None:
        if not text:
            return
        with self._cond:
            buf = self._pending + text
            pos = 0
            for match in _MARKER.finditer(buf):
                self._current.add(buf[pos : match.start()], self.limit)
                self._finished.append((int(match.group(1)), self._current.close()))
                self._current = _Segment()
                pos = match.end()
            rest = buf[pos:]
            # Hold back a tail that could be the start of a marker cut in two.
            cut = rest.rfind("\x1e")
            if cut != -1 and len(rest) - cut < _MARKER_MAX and not rest.endswith("\n"):
                rest, self._pending = rest[:cut], rest[cut:]
            else:
                self._pending = ""
            self._current.add(rest, self.limit)
            self._cond.notify_all()

    def wait_for(self, task_id: int, timeout: float) -> bool:
        """Wait until the end marker of ``task_id`` arrived (or the pipe closed)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or any(t >= task_id for t, _ in self._finished), timeout
            )

    def take_fresh(self) -> str:
        """Head text that arrived since the last call (for showing output live)."""
        with self._cond:
            done = "".join(c.head for _, c in self._finished)
            for _, captured in self._finished:
                captured.head = ""
            return done + self._current.take_fresh()

    def collect(self, task_id: int, everything: bool = False) -> Captured:
        """The output of every cell up to ``task_id`` not taken yet.

        With ``everything`` (a rank that never finished the cell), also what
        arrived of the cell still running.
        """
        with self._cond:
            result = Captured()
            keep = []
            for task, captured in self._finished:
                if task <= task_id:
                    result = result + captured
                else:
                    keep.append((task, captured))
            self._finished = keep
            if everything:
                result = result + self._current.close()
                self._current = _Segment()
            return result

    def join(self, timeout: float = 2.0) -> None:
        """Wait for the reader thread to finish (after the pipe closed)."""
        self._thread.join(timeout)
