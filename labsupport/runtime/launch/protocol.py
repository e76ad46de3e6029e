"""One request to every rank, and its replies: the kernel's side of a cell.

The kernel sends ``(kind, task_id, ...)`` to each rank and waits for replies
``("result", task_id, status, payload, figures)``. Every reply is matched to
its task id: a late reply to an earlier, interrupted cell is dropped, never
taken as the answer to this one.

While waiting, it shows the ranks' output (see ``streaming``) and watches for

* the timeout                 -> the ranks still running are "blocked";
* a rank that failed          -> the others get a short while to finish; the
  ones waiting inside ``torch.distributed`` (for the rank that failed) are
  blocked at once;
* the stop button (SIGINT)    -> the ranks still running are interrupted, and
  the ones that do not stop in :data:`INTERRUPT_GRACE_S` are blocked.

SIGINT is turned into a flag while waiting, so an interrupt can never cut a
reply in half on the control connection.
"""

from __future__ import annotations

import linecache
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

import cloudpickle

from labsupport.runtime.launch.errors import RemoteError
from labsupport.runtime.launch.group import Group
from labsupport.runtime.launch.process import WorkerProcess, describe_exit
from labsupport.runtime.launch.streaming import RankPrinter

#: After one rank fails, how long the others get to finish (unless they are
#: plainly waiting in torch.distributed for the rank that failed).
FAILURE_GRACE_S = 2.0
#: After one rank fails, when to first look at where the others are.
SETTLE_S = 0.2
#: How long an interrupted cell's ranks get to stop before they are killed.
INTERRUPT_GRACE_S = 3.0
#: How often the kernel wakes up to show output while a cell runs.
POLL_S = 0.1


@dataclass
class Reply:
    """One rank's answer to one request."""

    status: str  # "ok", "error" or "died"
    value: Any = None
    error: RemoteError | None = None
    figures: tuple[bytes, ...] = ()


@dataclass
class Outcome:
    """How a request ended on every rank."""

    replies: dict[int, Reply]
    blocked: list[int]  # ranks that did not finish: hung, stuck, or not interrupted
    stacks: dict[int, str] = field(default_factory=dict)  # where each blocked rank was
    interrupted: bool = False

    @property
    def died(self) -> bool:
        """True if a rank died during the request."""
        return any(r.status == "died" for r in self.replies.values())


class _Interrupts:
    """Counts SIGINTs (the stop button) instead of raising KeyboardInterrupt."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1


@contextmanager
def _sigint_as_flag():
    flag = _Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, flag)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def run_request(
    group: Group, task_id: int, request: tuple, timeout: float, printer: RankPrinter
) -> Outcome:
    """Send ``request`` as ``task_id`` to every rank; wait for the replies (see module doc)."""
    kind, *body = request
    for w in group.workers:
        w.conn.send((kind, task_id, *body))
    replies: dict[int, Reply] = {}
    waiting = {w.conn: w for w in group.workers}
    deadline = time.monotonic() + timeout
    settle_at: float | None = None
    stacks: dict[int, str] = {}
    handled_interrupts = 0
    with _sigint_as_flag() as interrupts:
        while waiting:
            now = time.monotonic()
            if interrupts.count > handled_interrupts:
                if handled_interrupts == 0:  # first press: ask the ranks to stop
                    for w in waiting.values():
                        w.signal(signal.SIGINT)
                    deadline = min(deadline, now + INTERRUPT_GRACE_S)
                else:  # pressed again: stop waiting
                    deadline = now
                handled_interrupts = interrupts.count
            if now >= deadline:
                break
            for conn in wait(list(waiting), timeout=min(deadline - now, POLL_S)):
                worker = waiting[conn]
                reply = _receive(worker, task_id)
                if reply is not None:
                    replies[worker.rank] = reply
                    del waiting[conn]
            printer.poll()
            if settle_at is None and any(r.status != "ok" for r in replies.values()):
                settle_at = time.monotonic() + SETTLE_S
                deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
            if settle_at is not None and waiting and time.monotonic() >= settle_at:
                settle_at = float("inf")  # look once
                ranks = sorted(w.rank for w in waiting.values())
                stacks = group.stacks(ranks)
                if all(_in_torch_distributed(stacks[r]) for r in ranks):
                    break  # all waiting for the rank that failed: no point in waiting more
    blocked = sorted(w.rank for w in waiting.values())
    missing = [r for r in blocked if r not in stacks]
    if missing:
        stacks.update(group.stacks(missing))
    for rank in replies:  # all of a finished rank's output
        for reader in group.workers[rank].readers:
            reader.wait_for(task_id, 2.0)
    printer.finish(task_id, finished=set(replies))
    stacks = {r: s for r, s in stacks.items() if r in blocked}
    return Outcome(replies, blocked, stacks, interrupted=handled_interrupts > 0)


def _in_torch_distributed(stack: str) -> bool:
    return "torch/distributed/" in stack.replace("\\", "/")


def _receive(worker: WorkerProcess, task_id: int) -> Reply | None:
    """The reply of ``worker`` to ``task_id``; None for a stale reply (dropped)."""
    try:
        msg = worker.conn.recv()
    except (EOFError, OSError):
        try:
            code = worker.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = describe_exit(code)
        err = RemoteError(
            worker.rank,
            "WorkerDied",
            f"rank {worker.rank} {how} before finishing the cell",
            f"(no traceback: the process {how})\n",
        )
        return Reply("died", error=err)
    if msg[0] != "result" or msg[1] != task_id:
        return None  # a late reply to an earlier request
    _, _, status, payload, figures = msg
    if status == "ok":
        try:
            value = cloudpickle.loads(payload)
        except Exception as exc:
            value = f"<value of rank {worker.rank} could not be unpickled here: {exc}>"
        return Reply("ok", value=value, figures=tuple(figures))
    err = RemoteError(worker.rank, payload["type"], payload["message"], payload["traceback"])
    return Reply("error", error=err, figures=tuple(figures))


def cell_sources(fn: Any) -> dict[str, str]:
    """The source of ``fn``'s notebook cell (it has no file), sent along with a call
    so that a rank's traceback through ``fn`` shows its lines."""
    code = getattr(fn, "__code__", None)
    filename = getattr(code, "co_filename", "")
    if not filename or os.path.exists(filename):
        return {}
    lines = linecache.getlines(filename)
    return {filename: "".join(lines)} if lines else {}
