"""What a schedule computes, checked on paper: replay it on sets of contributions."""

from __future__ import annotations

from collections.abc import Iterator
from html import escape

import numpy as np

from labsupport.schedules.model import Schedule, ScheduleError, Step


def initial_owner(schedule: Schedule) -> np.ndarray:
    """Whose input each rank's chunks hold before the first step: a (p, chunks) array, -1 for none.

    Rank r holds its own input, except in a broadcast (only the root has data)
    and an all-gather (rank r has only chunk r).
    """
    p, k, kind = schedule.world_size, schedule.num_chunks, schedule.collective
    owner = np.repeat(np.arange(p)[:, None], k, axis=1)
    if kind == "broadcast":
        owner[np.arange(p) != schedule.root] = -1
    elif kind == "all_gather":
        owner[np.arange(p)[:, None] != np.arange(k)[None, :]] = -1
    return owner


def initial_state(schedule: Schedule) -> list[list[int]]:
    """Whose inputs each rank's chunks hold before the first step, as bit sets.

    ``state[r][c]`` has bit i set when the chunk contains rank i's input;
    0 means the chunk holds nothing useful yet.
    """
    return [[1 << int(o) if o >= 0 else 0 for o in row] for row in initial_owner(schedule)]


def expected_state(schedule: Schedule) -> list[list[int | None]]:
    """What each rank's chunks must hold at the end (None: anything is allowed)."""
    p, k, kind, root = schedule.world_size, schedule.num_chunks, schedule.collective, schedule.root
    everyone = (1 << p) - 1
    if kind == "all_reduce":
        return [[everyone] * k for _ in range(p)]
    if kind == "reduce_scatter":
        return [[everyone if c == r else None for c in range(k)] for r in range(p)]
    if kind == "all_gather":
        return [[1 << c for c in range(k)] for _ in range(p)]
    if kind == "broadcast":
        return [[1 << root] * k for _ in range(p)]
    return [[everyone if r == root else None] * k for r in range(p)]  # reduce


def chunk_history(schedule: Schedule) -> list[list[list[int]]]:
    """Replay the schedule on bit sets of contributions; return the state after each step.

    The result has ``len(schedule) + 1`` states (the first is the initial one).
    Raises :class:`ScheduleError` when a rank sends a chunk that holds nothing,
    adds a contribution twice, or is written twice in one step.
    """
    state = initial_state(schedule)
    history = [[row[:] for row in state]]
    for i, st in enumerate(schedule.steps):
        before = [row[:] for row in state]  # sends read the start-of-step state
        written: dict[tuple[int, int], bool] = {}
        for t in st:
            for c in t.chunks:
                sent = before[t.src][c]
                where = f"step {i}, {t}: chunk {c}"
                if sent == 0:
                    raise ScheduleError(f"{where}: rank {t.src} sends a chunk that holds no data")
                if (t.dst, c) in written and not (t.reduce and written[(t.dst, c)]):
                    raise ScheduleError(f"{where}: rank {t.dst} is written twice in one step")
                written[(t.dst, c)] = t.reduce
                if t.reduce:
                    if state[t.dst][c] & sent:
                        twice = sorted(_members(state[t.dst][c] & sent))
                        raise ScheduleError(
                            f"{where}: rank {t.dst} would add the input of rank(s) {twice} twice"
                        )
                    state[t.dst][c] |= sent
                else:
                    state[t.dst][c] = sent
        history.append([row[:] for row in state])
    return history


def _members(bits: int) -> list[int]:
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


def verify(schedule: Schedule) -> None:
    """Raise :class:`ScheduleError` unless the schedule computes its collective."""
    final = chunk_history(schedule)[-1]
    for r, (got_row, want_row) in enumerate(zip(final, expected_state(schedule), strict=True)):
        for c, (got, want) in enumerate(zip(got_row, want_row, strict=True)):
            if want is not None and got != want:
                raise ScheduleError(
                    f"{schedule.name}: after the last step rank {r}'s chunk {c} holds the inputs "
                    f"of ranks {_members(got)}, expected {_members(want)}"
                )


def coverage(schedule: Schedule) -> Iterator[np.ndarray]:
    """For each state (initial, then after each step), how many inputs each chunk holds.

    Yields a read-only ``(world_size, num_chunks)`` integer array, reused from one
    step to the next (copy it to keep it). Unlike :func:`chunk_history` it checks
    nothing, but it is vectorised: a 1024-rank ring replays in well under a second.
    """
    count = (initial_owner(schedule) >= 0).astype(np.int64)
    view = count.view()
    view.flags.writeable = False
    yield view
    for st in schedule.steps:
        src, dst, chunk, reduce = _per_chunk(st)
        sent = count[src, chunk]  # a copy: what the senders held at the start of the step
        count[dst[~reduce], chunk[~reduce]] = sent[~reduce]
        np.add.at(count, (dst[reduce], chunk[reduce]), sent[reduce])
        yield view


def _per_chunk(st: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The step's transfers split into one row per chunk: (src, dst, chunk, reduce)."""
    lens = st.stop - st.start
    first = np.repeat(np.cumsum(lens) - lens, lens)
    chunk = np.arange(lens.sum()) - first + np.repeat(st.start, lens)
    return np.repeat(st.src, lens), np.repeat(st.dst, lens), chunk, np.repeat(st.reduce, lens)


class StepTable(str):
    """A Markdown pipe table that is also a rendered table in a notebook.

    It *is* the text (``print`` it in a terminal, ``splitlines`` it in a test);
    Jupyter shows it through :meth:`_repr_html_` (or :meth:`_repr_markdown_`).
    """

    rows: list[list[str]]

    def __new__(cls, rows: list[list[str]]) -> StepTable:
        """``rows[0]`` is the header, the rest are the body."""
        head, *body = rows
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        table = super().__new__(cls, "\n".join(lines))
        table.rows = rows
        return table

    def _repr_markdown_(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head, *body = self.rows
        cell = "<td style='text-align:left; font-family:monospace'>{}</td>".format
        html = ["<table>", "<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head)]
        html.append("</tr></thead><tbody>")
        html += ["<tr>" + "".join(cell(escape(c)) for c in row) + "</tr>" for row in body]
        return "".join([*html, "</tbody></table>"])

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(str(self))  # type: ignore[attr-defined] # plain text, not a quoted repr


def format_steps(schedule: Schedule) -> StepTable:
    """One row per step, one column per rank, the transfer(s) it sends (``->1 c3 (+=)``).

    A Markdown pipe table as text, shown as a real table in a notebook.
    """
    p = schedule.world_size
    rows = [["step", *(f"rank {r} sends" for r in range(p))]]
    for i, st in enumerate(schedule.steps):
        cells: list[list[str]] = [[] for _ in range(p)]
        for t in st:
            cells[t.src].append(str(t)[len(str(t.src)) :])
        rows.append([str(i), *(", ".join(c) or "-" for c in cells)])
    return StepTable(rows)
