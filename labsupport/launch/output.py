"""Reading what each rank prints, and showing it grouped by rank.

Each worker's stdout and stderr are pipes that a :class:`StreamReader` thread
drains, so C-level output (from gloo, HCCL, a C extension) is caught as well
as Python's ``print``. The worker ends each request's output with a marker
line, so :meth:`StreamReader.wait_for` can tell when it has all of it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TextIO

_MARKER = re.compile("\n?\x1eLABSUPPORT-END-(\\d+)\x1e\n")


class StreamReader:
    """Drains one pipe of one rank in a background thread."""

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        self._text = ""  # output not yet taken by take()
        self._pending = ""  # bytes decoded but maybe cut inside a marker
        self._seen: set[int] = set()
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._drain, name=name, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        decoder_buf = b""
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            decoder_buf += chunk
            try:
                text = decoder_buf.decode()
                decoder_buf = b""
            except UnicodeDecodeError as exc:  # a multi-byte character cut in two
                text = decoder_buf[: exc.start].decode()
                decoder_buf = decoder_buf[exc.start :]
                if len(decoder_buf) > 8:  # really invalid, not just cut
                    text += decoder_buf.decode(errors="replace")
                    decoder_buf = b""
            self._feed(text)
        with self._cond:
            self._text += self._pending
            self._pending = ""
            self._closed = True
            self._cond.notify_all()

    def _feed(self, text: str) -> None:
        with self._cond:
            buf = self._pending + text
            pos = 0
            for match in _MARKER.finditer(buf):
                self._text += buf[pos : match.start()]
                self._seen.add(int(match.group(1)))
                pos = match.end()
            rest = buf[pos:]
            # Keep back a tail that could be the start of a marker cut in two.
            cut = rest.rfind("\x1e")
            if cut != -1 and not rest[cut:].endswith("\n"):
                self._text += rest[:cut]
                self._pending = rest[cut:]
            else:
                self._text += rest
                self._pending = ""
            self._cond.notify_all()

    def wait_for(self, task_id: int, timeout: float) -> bool:
        """Wait until the end marker of ``task_id`` arrived (or the pipe closed)."""
        with self._cond:
            return self._cond.wait_for(lambda: task_id in self._seen or self._closed, timeout)

    def take(self) -> str:
        """Everything read so far and not yet taken."""
        with self._cond:
            text, self._text = self._text, ""
            return text

    def join(self, timeout: float = 2.0) -> None:
        """Wait for the reader thread to finish (after the pipe closed)."""
        self._thread.join(timeout)


def prefix_lines(rank: int, text: str) -> str:
    """``text`` with every line prefixed ``[rank N] ``."""
    if not text:
        return ""
    lines = text.splitlines()
    return "".join(f"[rank {rank}] {line}\n" for line in lines)


def print_by_rank(
    outputs: dict[int, tuple[str, str]],
    show: list[int] | None,
    stdout: TextIO,
    stderr: TextIO,
) -> None:
    """Print each rank's (stdout, stderr) in rank order, prefixed; only ``show`` ranks."""
    for rank in sorted(outputs):
        if show is not None and rank not in show:
            continue
        out, err = outputs[rank]
        stdout.write(prefix_lines(rank, out))
        if err:
            stdout.flush()
            stderr.write(prefix_lines(rank, err))
            stderr.flush()
    stdout.flush()
