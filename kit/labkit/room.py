"""Grade one learner's notebook in a process of its own, within a time and a memory limit.

:func:`grade_learner` starts ``python -m labkit.learner`` for the notebook
(its own process, in its own session, with its own group of ranks), and runs each
exercise's grader *here*, in the grading process, where no learner code runs: the
grader gets a stand-in for the learner's answer and a :class:`RemoteCluster`; what
the grader sends to the ranks goes to the learner's process, which puts the real
answer in for the stand-in and runs it on its ranks, and the ranks' values come back
as plain data (``torch.load(weights_only=True)``). So a learner's cell that patches
a grader, or the library the grader uses, patches the learner's own process, never
the verdict; and nothing carries over from one learner to the next.

What stops a learner, and costs that learner alone (:class:`Stopped`, one line why):
the wall-clock ``limit`` over everything its process does (every cell, the ranks'
start, every check), the ``memory`` limit over the resident memory of its process
and its ranks together, and its process ending (``os._exit``, a crash, a kill).
A grader's own ``timeout`` still bounds each call on the ranks (a deadlock becomes a
FAIL with each rank's stack, as in the notebook).

Not a sandbox: the learner's code runs with your permissions and can read and write
your files. It keeps one learner's mistakes, exits and monkeypatches from deciding
anyone's verdict; to grade code you do not trust, grade in a container or as
another user (as Otter-Grader does with Docker).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle
import nbformat

from labkit.answers import grade_answers
from labkit.learner import STAND_IN
from labkit.watch import Learner, Stopped, text
from labsupport.runtime.check.messages import CheckResult
from labsupport.runtime.language import LANGUAGES, speaking

#: Seconds a rank call keeps in hand for its stacks and reply before the learner's limit.
_MARGIN = 10.0


@dataclass
class Graded:
    """One learner's outcome: each exercise graded so far, and why grading stopped (if it did)."""

    results: dict[str, CheckResult] = field(default_factory=dict)
    stopped: str | None = None
    seconds: float = 0.0
    peak_bytes: int = 0  # the most memory its processes held together (resident, summed)
    log: str = ""  # the end of its process's stderr


class RemoteCluster:
    """What a grader gets as its cluster: the ranks run in the learner's process.

    Has the part of :class:`~labsupport.runtime.launch.Cluster` graders use (``run``, ``call``,
    ``exec``, ``world_size``); a rank error or a timeout comes back as the same
    exception, rebuilt from plain data.
    """

    def __init__(self, learner: Learner, world_size: int, timeout: float) -> None:
        self._learner = learner
        self.world_size = world_size
        self.timeout = timeout
        self.backend = "gloo"

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``fn(*args, **kwargs)`` on every rank of the learner's group."""
        return self.call(fn, args, kwargs)

    def call(
        self,
        fn: Callable[..., Any],
        args: Any = (),
        kwargs: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        show: list[int] | None = None,
    ) -> list[Any]:
        """Like ``Cluster.call``; the learner's answers stand where the grader put stand-ins."""
        buf = io.BytesIO()
        _StandInPickler(buf).dump((fn, tuple(args), dict(kwargs or {})))
        return self._request("call", buf.getvalue(), timeout)

    def exec(self, source: str, *, timeout: float | None = None, **_: Any) -> list[Any]:
        """Like ``Cluster.exec``: run ``source`` on every rank."""
        return self._request("exec", source, timeout)

    def _request(self, method: str, payload: Any, timeout: float | None) -> list[Any]:
        from labsupport.runtime.launch import CollectiveTimeout, RankError, RemoteError

        wanted = timeout or self.timeout
        timeout = min(wanted, self._learner.deadline - time.monotonic() - _MARGIN)
        doing = self._learner.doing
        if timeout < 1.0:
            raise self._learner.out_of_time()
        self._learner.send(("request", method, payload, timeout))
        reply = self._learner.receive()  # may say "starting 4 ranks" on the way
        self._learner.doing = doing
        if reply[0] == "timeout" and timeout < wanted:  # the learner's limit, not a hang
            raise self._learner.out_of_time()
        try:
            kind = reply[0]
            if kind == "values" and isinstance(reply[1], list):
                if len(reply[1]) != self.world_size:
                    raise ValueError(f"{len(reply[1])} values for {self.world_size} ranks")
                return reply[1]
            if kind == "rank_error":
                errors = {
                    int(r): RemoteError(int(r), text(t), text(m, 2000, True), text(tb, 20000, True))
                    for r, (t, m, tb) in reply[1].items()
                }
                stacks = {int(r): text(s, 20000, True) for r, s in reply[2].items()}
                error = RankError(errors, stacks, bool(reply[3]), int(reply[4]))
            elif kind == "timeout":
                stacks = {int(r): text(s, 20000, True) for r, s in reply[2].items()}
                error = CollectiveTimeout(float(reply[1]), stacks)
            elif kind == "error":
                error = RuntimeError(f"in the learner's process: {text(reply[1], 500)}")
            else:
                raise ValueError(f"unknown reply {text(kind, 40)!r}")
        except (TypeError, ValueError, IndexError, AttributeError, KeyError) as exc:
            raise Stopped(f"its process sent a malformed reply ({text(exc, 120)})") from None
        raise error


class _StandInPickler(cloudpickle.Pickler):
    """Sends a stand-in as a reference ("answer", exercise), never as the object itself."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, type | _StandIn) or callable(obj):
            exercise = getattr(obj, "__dict__", {}).get(STAND_IN)
            if isinstance(exercise, str):
                return ("answer", exercise)
        return None


class _StandIn:
    """The stand-in for an answer that is neither a class nor a function."""

    def __init__(self, exercise: str, name: str) -> None:
        self.__dict__[STAND_IN] = exercise
        self.__name__ = name


def stand_in(exercise: str, kind: str, name: str) -> Any:
    """A placeholder for the learner's answer, of the same kind and name (the grader's
    messages use its name); it travels to the learner's process as a reference."""
    if kind == "class":
        return type(name, (), {STAND_IN: exercise, "__module__": "learner"})
    if kind == "function":

        def placeholder(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("graders served by check.notebooks run answers on the ranks only")

        placeholder.__name__ = placeholder.__qualname__ = name
        placeholder.__dict__[STAND_IN] = exercise
        return placeholder
    return _StandIn(exercise, name)


Grader = Callable[..., CheckResult]


def grade_learner(
    path: Path,
    exercises: dict[str, tuple[str, Grader]],
    ranks: int = 4,
    timeout: float = 60.0,
    limit: float = 300.0,
    memory_gb: float = 4.0,
) -> Graded:
    """Grade one notebook in a process of its own (see the module docstring).

    ``exercises``: exercise -> (the name its cell defines, ``grader(answer, cluster,
    timeout)``); ``timeout``: seconds per call on the ranks; ``limit``: seconds for
    everything; ``memory_gb``: its processes' resident memory together.
    """
    start = time.monotonic()
    try:
        nb = nbformat.read(path, as_version=4)  # plain JSON: safe to read here
    except Exception as exc:
        return Graded(stopped=f"its notebook cannot be read ({type(exc).__name__}: {exc})")
    # The graders speak the notebook's language (a zh notebook's metadata says zh_CN), here
    # and in the learner's process (LABSUPPORT_LANG, inherited).
    with speaking(notebook_language(nb)):
        return _grade(path, exercises, ranks, timeout, limit, memory_gb, start)


def notebook_language(nb: Any) -> str:
    """The language a notebook is written in: its ``labsupport.language`` metadata, else en."""
    meta = nb.get("metadata", {}).get("labsupport", {})
    language = meta.get("language") if isinstance(meta, dict) else None
    return language if language in LANGUAGES else "en"


def _grade(
    path: Path,
    exercises: dict[str, tuple[str, Grader]],
    ranks: int,
    timeout: float,
    limit: float,
    memory_gb: float,
    start: float,
) -> Graded:
    """:func:`grade_learner` once the notebook is read."""
    graded = Graded()
    learner = Learner(path.resolve(), limit, memory_gb)
    try:
        names = {e: name for e, (name, _) in exercises.items()}
        learner.send(
            (
                "setup",
                {
                    "path": str(path.resolve()),
                    "exercises": names,
                    "ranks": ranks,
                    "memory": memory_gb,
                },
            )
        )
        reply = learner.receive()
        if reply[0] != "answers" or not isinstance(reply[1], dict):
            raise Stopped("its process did not report its answers")
        answers, problems = {}, {}
        for exercise in exercises:
            info = reply[1].get(exercise)
            if not isinstance(info, dict):
                problems[exercise] = "its process said nothing about this exercise"
            elif "problem" in info:
                problems[exercise] = text(info["problem"], 500)
            else:
                kind = info.get("kind") if info.get("kind") in ("class", "function") else ""
                answers[exercise] = stand_in(exercise, kind, _identifier(info.get("name")))
        cluster = RemoteCluster(learner, ranks, timeout)
        for exercise in exercises:
            learner.doing = f"grading Exercise {exercise}"
            one = {exercise: exercises[exercise]}
            graded.results.update(grade_answers(answers, problems, one, cluster, timeout))
        learner.send(("bye",))
    except Stopped as why:
        graded.stopped = str(why)
    finally:
        learner.close()
        graded.log = learner.tail.decode(errors="replace")
        graded.peak_bytes = learner.peak
        graded.seconds = time.monotonic() - start
    return graded


def _identifier(name: Any) -> str:
    """The answer's name, if it is a plain identifier (it names the stand-in)."""
    value = str(name)
    return value if value.isidentifier() and len(value) <= 80 else "answer"
