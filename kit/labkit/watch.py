"""One learner's process, seen from the grading process: start it, keep it within its
limits, talk to it, and stop it with everything it started.

:class:`Learner` starts ``python -m labkit.learner`` for a notebook (in the
notebook's folder, in a session of its own, its output kept to the last 4 kB) and,
while waiting for each of its replies, looks four times a second at three things:
the wall-clock time since it started (``limit``), the resident memory of it and every
process under it (its ranks, whatever its cells start) together (``memory_gb``), and
whether it is still running. Any of the three raises :class:`Stopped` with one line
that says which and while doing what. Its replies are read with
``torch.load(weights_only=True)``: plain data and tensors, nothing that runs code here.
"""

from __future__ import annotations

import io
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle
import psutil

from labkit.learner import receive, send
from labsupport.runtime.launch.process import describe_exit, kill_group

_TICK = 0.25  # how often the time, the memory and the process are looked at


class Stopped(BaseException):
    """This learner could not be graded (out of time or memory, or its process ended).

    A BaseException, so that no grader's ``except Exception`` turns it into a FAIL.
    """


def text(value: Any, limit: int = 200, lines: bool = False) -> str:
    """A string from the learner's process, printable and short (one line unless ``lines``)."""
    keep = "\n\t" if lines else ""
    out = re.sub(f"[^\x20-\x7e\u00a0-\uffff{keep}]", " ", str(value))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _safe_load(data: bytes) -> Any:
    """The learner's process's reply: plain data and tensors only, nothing that runs code."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


class Learner:
    """The learner's process, its limits, and the channel to it."""

    def __init__(self, path: Path, limit: float, memory_gb: float) -> None:
        self.deadline = time.monotonic() + limit
        self.limit, self.memory_gb = limit, memory_gb
        self.doing = "starting its process"
        self.sock, theirs = socket.socketpair()
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "labkit.learner",
                    str(theirs.fileno()),
                    str(os.getpid()),
                ],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=path.parent,
                env=env,
                start_new_session=True,  # its own process group: a kill reaches all of it
            )
        finally:
            theirs.close()
        self.seen: dict[int, psutil.Process] = {}
        try:
            self.seen[self.proc.pid] = psutil.Process(self.proc.pid)
        except psutil.Error:  # it is gone already: check() says how it ended
            pass
        self.peak = 0  # the most resident memory seen, bytes
        self.tail = b""
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        """Keep the last 4 kB of its stderr (its output is unbounded; memory is not)."""
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            self.tail = (self.tail + chunk)[-4096:]

    def check(self) -> None:
        """Raise :class:`Stopped` if time is up, memory is over, or the process has ended."""
        code = self.proc.poll()
        if code is not None:
            running = self.doing.startswith("running")  # one of the learner's cells
            why = " (os._exit in the notebook's code?)" if code >= 0 and running else ""
            raise Stopped(f"its process {describe_exit(code)} while {self.doing}{why}")
        if time.monotonic() > self.deadline:
            raise self.out_of_time()
        used = self._resident()
        self.peak = max(self.peak, used)
        if used > self.memory_gb * 2**30:
            raise Stopped(
                f"its processes held {used / 2**30:.1f} GB of memory while {self.doing}, "
                f"over its limit of {self.memory_gb:g} GB; it was stopped."
            )

    def out_of_time(self) -> Stopped:
        """Why it stops when its time is (about to be) up."""
        hint = (
            " (an endless loop, or a very slow cell?)" if self.doing.startswith("running") else ""
        )
        return Stopped(f"still {self.doing} after {self.limit:g} s, its time limit{hint}")

    def _find_children(self) -> None:
        """Remember every process under its process (a rank outlives it if it dies first)."""
        try:
            for child in self.seen[self.proc.pid].children(recursive=True):
                self.seen.setdefault(child.pid, child)
        except (psutil.Error, KeyError):
            pass

    def _resident(self) -> int:
        """Resident bytes of its process and every process under it (its ranks)."""
        self._find_children()
        total = 0
        for proc in list(self.seen.values()):
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total

    def send(self, request: tuple) -> None:
        """Send a request to the learner's process (it is stopped if it does not listen)."""
        self.sock.settimeout(max(0.1, self.deadline - time.monotonic()))
        try:
            send(self.sock, cloudpickle.dumps(request))
        except OSError:
            self.check()
            raise Stopped(f"its process stopped listening while {self.doing}") from None

    def receive(self) -> tuple:
        """The next reply (progress messages update :attr:`doing`), within the limits."""
        while True:
            ready, _, _ = select.select([self.sock], [], [], _TICK)
            if not ready:
                self.check()
                continue
            self.sock.settimeout(max(1.0, self.deadline - time.monotonic()))
            try:
                reply = _safe_load(receive(self.sock))
            except (EOFError, OSError):
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                self.check()
                raise Stopped(f"its process closed its connection while {self.doing}") from None
            except Exception as exc:
                raise Stopped(
                    f"its process sent what the grader cannot read while {self.doing} "
                    f"({text(type(exc).__name__)}: {text(exc, 120)})"
                ) from None
            if not isinstance(reply, tuple) or not reply or not isinstance(reply[0], str):
                raise Stopped(f"its process sent a malformed reply while {self.doing}")
            if reply[0] == "progress" and len(reply) == 2:
                self.doing = text(reply[1], 100)
                continue
            return reply

    def close(self) -> None:
        """Stop its process and every process it started (ranks included); reap it."""
        self._find_children()
        for proc in self.seen.values():
            try:
                if not proc.is_running():  # psutil checks it is the same process, not a reused pid
                    continue
                if os.getpgid(proc.pid) == proc.pid:  # a group leader (its process, each rank)
                    kill_group(proc.pid)  # with whatever it started
                else:
                    proc.kill()
            except (psutil.Error, OSError):
                pass
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.reader.join(2.0)
