"""Where is a hung rank blocked? Reading the stack dumps that faulthandler writes.

Each worker arms ``faulthandler.register(SIGUSR1, file=..., all_threads=True)``.
On a hang the kernel sends SIGUSR1; faulthandler writes every thread's stack
from inside the signal handler, which works even while the rank is blocked in
C++ (a gloo ``recv``), where Python code could not run. This module turns that
dump into a readable traceback of the rank's main thread.
"""

from __future__ import annotations

import linecache
import os
import re
import time

from labsupport.runtime.launch.frames import format_frames, frame

_HIDDEN_FILES = (os.path.join("launch", "worker.py"), "c10d_logger.py")
_SITE_PACKAGES = re.compile(r"^.*[/\\](site|dist)-packages[/\\]")
_SITE_PACKAGES_IN_LINE = re.compile(r'File ".*?[/\\](?:site|dist)-packages[/\\]')
#: A frame as faulthandler writes it (no comma before "in": not a traceback's format).
_FAULTHANDLER_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_THREAD = re.compile(r"(?:Current thread|Thread) (0x[0-9a-f]+)")


def tidy_traceback(text: str) -> str:
    """A formatted traceback made for reading: torch's logging wrapper frame and the
    ``^^^^`` marker lines dropped, site-packages paths shortened."""
    lines: list[str] = []
    skip_source = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if skip_source and line.startswith("    ") and not stripped.startswith("File "):
            skip_source = False
            continue
        skip_source = False
        if stripped.startswith("File ") and "c10d_logger.py" in stripped:
            skip_source = True
            continue
        if stripped and set(stripped) <= {"^", "~"}:
            continue
        lines.append(_SITE_PACKAGES_IN_LINE.sub('File "', line))
    return "".join(lines)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def read_stack(path: str, main_ident: int, deadline: float) -> str:
    """Wait (until ``deadline``, a ``time.monotonic()`` value) for a complete dump; format it."""
    text = ""
    while time.monotonic() < deadline:
        text = _read(path)
        time.sleep(0.05)
        if text and text == _read(path):  # the dump stopped growing
            break
    return main_thread_stack(text, main_ident) or "(no stack: the rank did not respond)"


def main_thread_stack(dump: str, main_ident: int) -> str:
    """The main thread's block of a faulthandler dump, innermost call last, with source lines.

    The worker's own loop, frozen import machinery and torch's logging wrapper
    are left out, and site-packages paths are shortened (``torch/distributed/...``).
    """
    chosen = None
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump.strip()):
        head = _THREAD.match(block)
        if head and int(head.group(1), 16) == main_ident:
            chosen = block
    if chosen is None:
        return ""
    frames = []
    for line in chosen.splitlines()[1:]:
        m = _FAULTHANDLER_FRAME.match(line)
        if not m:
            continue
        filename, lineno, func = m.group(1), int(m.group(2)), m.group(3)
        if filename.startswith("<frozen") or filename.endswith(_HIDDEN_FILES):
            continue
        source = linecache.getline(filename, lineno).strip()
        frames.append(frame(_SITE_PACKAGES.sub("", filename), lineno, func, source))
    frames.reverse()  # faulthandler prints the innermost call first
    return format_frames(frames)
