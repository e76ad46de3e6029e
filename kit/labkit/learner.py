"""The process in which one learner's notebook runs while the folder grader grades it.

``python -m labkit.learner FD PID`` is started by :mod:`labkit.watch`,
one process per learner, talks to the grading process (``PID``) over the socket ``FD``
(frames of :func:`send` / :func:`receive`), and exits when that process is gone. What it
does, in order:

1. caps its own data memory (``RLIMIT_DATA``, inherited by the ranks it starts), then
   runs the notebook's first code cell and its exercise cells
   (:func:`labkit.answers.load_answers`), saying which cell it is in;
2. reports what each exercise's cell defined (a class, a function, or why not);
3. starts its own group of ranks when the grader first asks, and runs there what the
   grader sends: the grader's function with the learner's answer in place of the
   placeholder the grader holds (:data:`STAND_IN`), returning the ranks' raw values
   or their error, as plain data.

It never decides anything: the graders run in the grading process, which runs no
learner code and reads this process's replies with ``torch.load(weights_only=True)``
(plain data and tensors only). A learner's cell that patches the graders or exits
changes this process only.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from labkit.answers import load_answers

#: The attribute that marks the grading process's placeholder for an exercise's answer.
STAND_IN = "__labsupport_answer__"
#: The largest frame either side accepts (the ranks' values for a check are far smaller).
MAX_FRAME = 256 << 20
_HEADER = struct.Struct("!Q")


def send(sock: socket.socket, data: bytes) -> None:
    """Send one frame: its length, then the bytes."""
    sock.sendall(_HEADER.pack(len(data)) + data)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> bytes:
    """One frame's bytes (blocks; ``sock.settimeout`` bounds it)."""
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes (at most {MAX_FRAME})")
    return _exactly(sock, size)


def encode(obj: Any) -> bytes:
    """This process's replies: ``torch.save``, so that the grader can load them with
    ``weights_only=True`` (which refuses anything but plain data and tensors)."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class _Answers(pickle.Unpickler):
    """Unpickles the grader's request, putting the learner's answers in for the placeholders."""

    def __init__(self, data: bytes, answers: dict[str, Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.answers = answers

    def persistent_load(self, pid: Any) -> Any:
        kind, exercise = pid
        if kind != "answer" or exercise not in self.answers:
            raise pickle.UnpicklingError(f"no answer for {pid!r}")
        return self.answers[exercise]


def _cap_memory(gigabytes: float) -> None:
    """Cap this process's data (and the ranks', which inherit it): a runaway allocation
    fails with MemoryError here instead of pushing the machine into swap."""
    try:
        import resource

        cap = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    except (ImportError, ValueError, OSError):  # not on this system: the parent still watches
        pass


def describe(answer: Any) -> dict[str, str]:
    """What kind of thing an exercise's cell defined, and its name (for the grader's stand-in)."""
    kind = "class" if isinstance(answer, type) else "function" if callable(answer) else "object"
    return {"kind": kind, "name": str(getattr(answer, "__name__", type(answer).__name__))}


def _error_reply(err: BaseException) -> tuple:
    """A rank error or timeout as plain data (the grader rebuilds the exception)."""
    from labsupport.runtime.launch import CollectiveTimeout, RankError

    if isinstance(err, RankError):
        errors = {r: (e.type_name, e.message, e.traceback) for r, e in err.errors.items()}
        return ("rank_error", errors, dict(err.stacks), bool(err.restarted), int(err.first))
    if isinstance(err, CollectiveTimeout):
        return ("timeout", float(err.timeout), dict(err.stacks))
    return ("error", f"{type(err).__name__}: {err}")


def serve(sock: socket.socket, setup: dict[str, Any]) -> None:
    """Run the notebook's cells, report the answers, then run the grader's requests."""
    path = Path(setup["path"])
    exercises: dict[str, str] = setup["exercises"]  # exercise -> the name its cell defines

    def progress(where: str) -> None:
        send(sock, encode(("progress", where)))

    namespace, problems = load_answers(path, list(exercises), on_cell=progress)
    answers, report = {}, {}
    for exercise, name in exercises.items():
        if exercise in problems:
            report[exercise] = {"problem": problems[exercise]}
        elif name not in namespace:
            report[exercise] = {"problem": f"its cell does not define {name}"}
        else:
            answers[exercise] = namespace[name]
            report[exercise] = describe(namespace[name])
    send(sock, encode(("answers", report)))
    cluster = None
    try:
        while True:
            request = pickle.loads(receive(sock))  # from the grading process
            if request[0] == "bye":
                return
            _, method, payload, timeout = request
            if cluster is None:
                from labsupport.runtime.check.overlap_timing import NETWORK
                from labsupport.runtime.launch import Cluster

                progress(f"starting {setup['ranks']} ranks")
                # On the overlap graders' network: they judge overlap by its emulated time.
                cluster = Cluster(
                    setup["ranks"], backend="gloo", timeout=timeout, network=NETWORK, standby=False
                )
            try:
                if method == "exec":
                    values = cluster.exec(payload, timeout=timeout, show=[], name="grader")
                else:
                    fn, args, kwargs = _Answers(payload, answers).load()
                    values = cluster.call(fn, args, kwargs, timeout=timeout, show=[])
                reply = encode(("values", list(values)))  # RankValues is not plain data
            except Exception as err:
                reply = encode(_error_reply(err))
            send(sock, reply)
    finally:
        if cluster is not None:
            cluster.shutdown()


def _die_with_the_grader(parent: int) -> None:
    """Exit as soon as the grading process (``parent``) is gone, even in an endless cell."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)  # our ranks follow: their lifeline pipe from us closes

    threading.Thread(target=watch, name="grader-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m labkit.learner FD PID`` (the socket to the grading
    process, and its pid)."""
    argv = sys.argv[1:] if argv is None else argv
    _die_with_the_grader(int(argv[1]))
    sock = socket.socket(fileno=int(argv[0]))
    _, setup = pickle.loads(receive(sock))  # ("setup", {...}) from the grading process
    _cap_memory(setup["memory"])
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.chdir(Path(setup["path"]).parent)  # as Jupyter runs a notebook: in its folder
    serve(sock, setup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
