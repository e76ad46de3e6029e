"""Chrome trace JSON: the spans of every rank, for Perfetto (ui.perfetto.dev) or chrome://tracing.

The Trace Event Format: one "X" (complete) event per span, with ``ts`` and
``dur`` in microseconds, ``pid`` = rank and ``tid`` = one row per lane (and
per extra row where spans of one lane overlap, see
:func:`labsupport.runtime.trace.tracks`); "M" metadata events name the processes
("rank 0") and threads ("compute", "comm", "comm 2") and keep them in order.

    trace.write_chrome(trace.align(spans), "timeline.json")   # then open it in Perfetto

Times are written as given: :func:`labsupport.runtime.trace.align` first makes the
trace start at 0.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from labsupport.runtime.trace.merge import tracks
from labsupport.runtime.trace.record import Span, now_ns


def to_chrome(spans: Iterable[Span]) -> dict[str, Any]:
    """The spans as a dict in the Trace Event Format (see :func:`write_chrome` to save it)."""
    events: list[dict[str, Any]] = []
    tids: dict[int, int] = {}  # next free tid per rank
    for (rank, lane), rows in tracks(spans).items():
        if rank not in tids:
            tids[rank] = 0
            events.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": rank,
                    "tid": 0,
                    "args": {"name": f"rank {rank}"},
                }
            )
            events.append(
                {
                    "ph": "M",
                    "name": "process_sort_index",
                    "pid": rank,
                    "tid": 0,
                    "args": {"sort_index": rank},
                }
            )
        for i, row in enumerate(rows):
            tid = tids[rank]
            tids[rank] += 1
            label = lane if i == 0 else f"{lane} {i + 1}"
            events.append(
                {"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": label}}
            )
            events.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": rank,
                    "tid": tid,
                    "args": {"sort_index": tid},
                }
            )
            for s in row:
                event = {
                    "ph": "X",
                    "name": s.name,
                    "cat": lane,
                    "pid": rank,
                    "tid": tid,
                    "ts": s.start_ns / 1e3,
                    "dur": s.duration_ns / 1e3,
                }
                if s.info:
                    event["args"] = {"info": s.info}
                events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome(spans: Iterable[Span], path: str | os.PathLike[str]) -> Path:
    """Write the Chrome trace JSON to ``path`` atomically; returns the path.

    The file is written next to its destination and renamed into place, so a
    failure leaves no half-written file (and an older file, if any, intact).
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {target}: directory {target.parent} does not exist "
            "(create it first, e.g. os.makedirs(..., exist_ok=True), or choose another path)"
        )
    trace = to_chrome(spans)  # before opening anything: bad spans fail here
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a trace is meant to be shared
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(trace, f)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def from_profiler(trace: str | os.PathLike[str] | dict[str, Any], rank: int) -> list[Span]:
    """Spans from one rank's ``torch.profiler`` trace (``prof.export_chrome_trace(path)``).

    Keeps the communication events: ``gloo:*`` (the execution, on gloo's
    worker threads) in lane "gloo", and ``c10d::*`` (the call on the main
    thread: for ``async_op=True`` only the launch) in lane "c10d". The
    profiler's times are wall-clock (``baseTimeNanoseconds`` + ``ts``, the
    same base on every rank of one host); they are moved onto the clock of
    :func:`labsupport.runtime.trace.span` by the current difference between the two
    clocks, so marker spans and profiler spans can share one picture (to
    within the few µs of reading two clocks, plus any NTP slewing since).
    """
    data = trace if isinstance(trace, dict) else json.loads(Path(trace).read_text())
    if "traceEvents" not in data:
        raise ValueError("not a Chrome trace: no 'traceEvents' (use prof.export_chrome_trace)")
    base = int(data.get("baseTimeNanoseconds", 0)) - (time.time_ns() - now_ns())
    spans = []
    for e in data["traceEvents"]:
        name = str(e.get("name", ""))
        lane = "gloo" if name.startswith("gloo:") else "c10d" if name.startswith("c10d::") else None
        if lane is None or e.get("ph") != "X":
            continue
        start = base + round(float(e["ts"]) * 1e3)
        spans.append(Span(rank, lane, name, start, start + round(float(e.get("dur", 0)) * 1e3)))
    return sorted(spans, key=lambda s: (s.start_ns, s.end_ns))


def backend_ops(events: Iterable[Any], backend: str) -> list[tuple[str, int | None]]:
    """What a backend ran, from ``torch.profiler`` events: ``(name, elements of the first input)``.

    Each backend records its own operations under its name: ``gloo:all_reduce``,
    ``nccl:all_reduce``, ``hccl:all_reduce`` ... so pass ``dist.get_backend()``
    and the same code reads a CPU, GPU or NPU profile. The size is ``None`` when
    the profiler recorded no input shape (``profile(record_shapes=True)`` records them).
    """
    prefix = f"{backend}:"
    ops = []
    for event in events:
        if not event.name.startswith(prefix):
            continue
        shapes = getattr(event, "input_shapes", None) or [[]]
        ops.append((event.name, shapes[0][0] if shapes[0] else None))
    return ops
