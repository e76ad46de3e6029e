"""All ranks' spans together: merge them, put them on one time axis, read collectives honestly.

* :func:`merge` takes what each rank returned (``cluster.run`` gives one list
  per rank) and makes one list; :func:`gather` does the same inside the ranks
  (under ``torchrun``), onto one rank.
* :func:`align` moves time zero to the first span of all ranks (one host: one
  clock), or lines the ranks up on the end of a barrier (several hosts).
* :func:`tracks` gives overlapping spans of one lane separate rows (two
  buckets in flight at once), for the picture and the Chrome trace.
* :func:`compare_ends`: a collective's span on one rank includes the time it
  waited for the slowest peer, so durations differ between ranks while end
  times agree. It lines up the k-th call of each collective on every rank.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labsupport.runtime.trace.record import COMM, Span


def _is_plain_span(item: Any) -> bool:
    """A span as a plain tuple or list (from JSON, say): rank, lane, name, start, end[, info]."""
    return (
        isinstance(item, (tuple, list))
        and len(item) in (5, 6)
        and isinstance(item[0], int)
        and all(isinstance(x, str) for x in item[1:3])
    )


def _flatten(items: Any, into: list[Span]) -> None:
    for item in items:
        if isinstance(item, Span):
            into.append(item)
        elif _is_plain_span(item):
            into.append(Span(*item))
        elif isinstance(item, (list, tuple)):
            _flatten(item, into)  # one rank's list inside the list of ranks
        else:
            raise TypeError(
                f"expected a trace.Span (rank, lane, name, start_ns, end_ns, info), got "
                f"{item!r}; return trace.spans() from each rank"
            )


def merge(per_rank: Iterable[Any]) -> list[Span]:
    """One list, by start time, from each rank's spans (e.g. ``cluster.run(...)``'s value).

    Lists of spans may be nested (one per rank, or per run) or flat already.
    """
    spans: list[Span] = []
    _flatten(per_rank, spans)
    return sorted(spans, key=lambda s: (s.start_ns, s.rank, s.end_ns))


def gather(spans: Sequence[Span] | None = None, dst: int = 0) -> list[Span] | None:
    """Inside the ranks: send every rank's spans to rank ``dst`` (a collective: all ranks call it).

    Returns the merged list on ``dst`` and None elsewhere. ``spans``: default
    this rank's spans from the default recorder.
    """
    import torch.distributed as dist

    from labsupport.runtime.trace.record import default

    mine = list(default().spans() if spans is None else spans)
    everyone: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == dst else None
    dist.gather_object(mine, everyone, dst=dst)
    return merge(everyone) if everyone is not None else None


def align(spans: Iterable[Span], anchor: str | None = None) -> list[Span]:
    """The same spans with time zero at the earliest start of all ranks.

    ``anchor``: the name of a span every rank recorded (a barrier, say); each
    rank is shifted so that the end of its first ``anchor`` span is at the
    same time. Use it when the ranks ran on several hosts (different clocks):
    the error is then how far apart the barrier let the ranks go, typically
    one network latency.
    """
    spans = merge([spans])
    if not spans:
        return []
    shift: dict[int, int] = defaultdict(int)
    if anchor is not None:
        for rank in {s.rank for s in spans}:
            ends = [s.end_ns for s in spans if s.rank == rank and s.name == anchor]
            if not ends:
                raise ValueError(f"rank {rank} has no span named {anchor!r} to align on")
            shift[rank] = -ends[0]
    zero = min(s.start_ns + shift[s.rank] for s in spans)
    moved = []
    for s in spans:
        delta = shift[s.rank] - zero
        moved.append(s._replace(start_ns=s.start_ns + delta, end_ns=s.end_ns + delta))
    return moved


def tracks(spans: Iterable[Span]) -> dict[tuple[int, str], list[list[Span]]]:
    """Per (rank, lane), spans split into rows in which none overlap (first fit, by start)."""
    rows: dict[tuple[int, str], list[list[Span]]] = defaultdict(list)
    for s in merge([spans]):
        lane_rows = rows[(s.rank, s.lane)]
        for row in lane_rows:
            if row[-1].end_ns <= s.start_ns:
                row.append(s)
                break
        else:
            lane_rows.append([s])
    return dict(sorted(rows.items(), key=lambda kv: (kv[0][0], _lane_order(kv[0][1]))))


def _lane_order(lane: str) -> tuple[int, str]:
    return ({"compute": 0, COMM: 1}.get(lane, 2), lane)


@dataclass(frozen=True)
class CollectiveEnds:
    """The k-th call of one collective on every rank: when each rank's span ended, and how long."""

    name: str
    index: int
    ranks: tuple[int, ...]
    starts_ns: tuple[int, ...]
    ends_ns: tuple[int, ...]

    @property
    def durations_ns(self) -> tuple[int, ...]:
        """Each rank's span length (includes waiting for the slowest peer)."""
        return tuple(e - s for s, e in zip(self.starts_ns, self.ends_ns, strict=True))

    @property
    def end_spread_ns(self) -> int:
        """Latest end minus earliest end: small, since nobody finishes before the last arrives."""
        return max(self.ends_ns) - min(self.ends_ns)

    @property
    def duration_spread_ns(self) -> int:
        """Longest minus shortest span: how long the earliest rank waited, roughly."""
        return max(self.durations_ns) - min(self.durations_ns)


def compare_ends(spans: Iterable[Span], lane: str = COMM) -> list[CollectiveEnds]:
    """Line up the k-th span of each name in ``lane`` across ranks, in order of first end.

    Names that some rank never recorded (``isend``/``irecv``, a subgroup's
    collective) are left out. A name every rank recorded, but not equally
    often, is a ValueError: collectives are called the same number of times
    on every rank, so the k-th calls would not match.
    """
    by_name: dict[str, dict[int, list[Span]]] = defaultdict(lambda: defaultdict(list))
    all_ranks = set()
    for s in merge([spans]):
        all_ranks.add(s.rank)
        if s.lane == lane:
            by_name[s.name][s.rank].append(s)
    result = []
    for name, per_rank in by_name.items():
        if set(per_rank) != all_ranks:
            continue
        counts = {r: len(per_rank[r]) for r in sorted(all_ranks)}
        if len(set(counts.values())) != 1:
            raise ValueError(f"ranks recorded {name!r} a different number of times: {counts}")
        ranks = tuple(sorted(per_rank))
        for k in range(counts[ranks[0]]):
            calls = [per_rank[r][k] for r in ranks]
            starts, ends = tuple(c.start_ns for c in calls), tuple(c.end_ns for c in calls)
            result.append(CollectiveEnds(name, k, ranks, starts, ends))
    return sorted(result, key=lambda c: min(c.ends_ns))


def format_ends(rows: Sequence[CollectiveEnds], limit: int = 10) -> str:
    """A small table (ms): per call, each rank's end and duration, and the two spreads."""
    if not rows:
        return "(no collectives recorded)"
    ranks = rows[0].ranks
    head = ["call".ljust(18)] + [f"end r{r}".rjust(9) for r in ranks]
    head += [f"dur r{r}".rjust(9) for r in ranks] + ["end spread", "dur spread"]
    lines = [" ".join(head)]
    zero = min(min(c.starts_ns) for c in rows)
    for c in rows[:limit]:
        cells = [f"{c.name} #{c.index}"[:18].ljust(18)]
        cells += [f"{(e - zero) / 1e6:9.2f}" for e in c.ends_ns]
        cells += [f"{d / 1e6:9.2f}" for d in c.durations_ns]
        cells += [f"{c.end_spread_ns / 1e6:10.2f}", f"{c.duration_spread_ns / 1e6:10.2f}"]
        lines.append(" ".join(cells))
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more")
    return "\n".join(lines)
