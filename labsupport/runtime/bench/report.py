"""Showing and saving results: nccl-tests' table, JSON, CSV, and back again.

The table has nccl-tests' columns and number formats, so that a line from
this benchmark and a line from ``all_reduce_perf`` can be read side by side::

    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)        ...
            1024           256     float     sum      -1    41.07    0.02    0.04      0 ...
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from typing import IO, Any

from labsupport.costmodel import NATIVE_IN_PLACE
from labsupport.runtime.bench.core import Result, Sweep
from labsupport.runtime.bench.options import AVERAGE_NAMES

#: Columns of the CSV file (one line per result; JSON also keeps ``iter_us``).
CSV_FIELDS = [
    "collective",
    "size",
    "count",
    "type",
    "redop",
    "root",
    "nranks",
    "in_place",
    "time_us",
    "algbw",
    "busbw",
    "wrong",
    "median_us",
    "backend",
]


def header_lines(sweep: Sweep) -> list[str]:
    """The ``#`` lines above the table: what ran, where, with which options."""
    o = sweep.options
    step = (
        f"{o.stepfactor:g}(factor)"
        if o.stepfactor
        else (f"{o.stepbytes}(bytes)" if o.stepbytes else "2(factor)")
    )
    lines = [
        # nccl-tests' first line, in two (it is wider than a notebook at 1400 px)
        f"# labsupport.runtime.bench {o.collective}: nranks {sweep.nranks} backend {sweep.backend} "
        f"minBytes {o.minbytes} maxBytes {o.maxbytes} step: {step}",
        f"# warmup iters: {o.warmup_iters} iters: {o.iters} validation: {o.check} "
        f"average: {o.average}({AVERAGE_NAMES[o.average]})",
        "#",
        "# Using devices",
        *(f"#  {line}" for line in sweep.devices),
        "#",
        *(
            [f"# out-of-place = a copy of the input + the in-place call (torch's {o.collective} "
             "is in place only)", "#"]
            if NATIVE_IN_PLACE.get(o.collective) else []
        ),
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
        "           out-of-place                       in-place",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        + f"  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}" * 2,
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
        + f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}" * 2,
    ]  # fmt: skip
    return lines


def _time_str(us: float) -> str:
    # nccl-tests keeps the column 7 wide: fewer decimals for longer times
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def _half(r: Result) -> str:
    if r.time_us is None:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>5}"
    wrong = "N/A" if r.wrong is None else str(r.wrong)
    return f"  {_time_str(r.time_us):>7}  {r.algbw:6.2f}  {r.busbw:6.2f}  {wrong:>5}"


def row_line(out_of_place: Result, in_place: Result) -> str:
    """One line of the table: a size, out-of-place then in-place."""
    r = out_of_place
    head = f"{r.size:12d}  {r.count:12d}  {r.type:>8}  {r.redop:>6}  {r.root:6d}"
    return head + _half(out_of_place) + _half(in_place)


def footer_lines(results: Iterable[Result]) -> list[str]:
    """nccl-tests' footer: results with wrong elements, and the mean busbw of all results."""
    results = list(results)
    errors = sum(1 for r in results if r.wrong)
    measured = [r.busbw for r in results if r.busbw is not None]
    avg = sum(measured) / len(measured) if measured else 0.0
    return [
        f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}",
        f"# Avg bus bandwidth    : {avg:g} ",
        "#",
    ]


def pairs(results: list[Result]) -> list[tuple[Result, Result]]:
    """(out-of-place, in-place) per size, in the order they ran."""
    return list(zip(results[0::2], results[1::2], strict=True))


def format_report(sweep: Sweep) -> str:
    """The whole text: header, one line per size, footer."""
    lines = header_lines(sweep)
    lines += [row_line(a, b) for a, b in pairs(sweep.results)]
    lines += footer_lines(sweep.results)
    return "\n".join(lines)


class TablePrinter:
    """Streams the table as the sweep goes (pass its methods to ``run_sweep``)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def start(self, sweep: Sweep) -> None:
        """Print the header."""
        print("\n".join(header_lines(sweep)), file=self.stream, flush=True)

    def row(self, out_of_place: Result, in_place: Result) -> None:
        """Print one size."""
        print(row_line(out_of_place, in_place), file=self.stream, flush=True)

    def end(self, sweep: Sweep) -> None:
        """Print the footer."""
        print("\n".join(footer_lines(sweep.results)), file=self.stream, flush=True)


# ----------------------------------------------------------------------------- files


def write_json(path: str, sweep: Sweep) -> None:
    """Save options, ranks and every result (with per-iteration times) as JSON."""
    data = {
        "tool": "labsupport.runtime.bench",
        "options": sweep.options.to_dict(),
        "nranks": sweep.nranks,
        "backend": sweep.backend,
        "devices": sweep.devices,
        "results": [r.to_dict() for r in sweep.results],
    }
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def write_csv(path: str, results: Iterable[Result]) -> None:
    """Save one line per result (no per-iteration times) as CSV."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in results:
            writer.writerow(r.to_dict())


def load_json(path: str) -> list[dict[str, Any]]:
    """The results saved by ``--json`` (a list of records), e.g. from a cluster run."""
    with open(path) as f:
        return json.load(f)["results"]


def as_records(results: Any) -> list[dict[str, Any]]:
    """A list of dicts from Results, dicts, a Sweep, or a pandas DataFrame."""
    if isinstance(results, Sweep):
        results = results.results
    if hasattr(results, "to_dict") and hasattr(results, "columns"):  # a DataFrame
        return results.to_dict("records")
    return [r.to_dict() if isinstance(r, Result) else dict(r) for r in results]


def to_frame(results: Any, as_frame: bool | None = None) -> Any:
    """A pandas DataFrame if pandas is installed (or ``as_frame`` is True), else records."""
    records = as_records(results)
    if as_frame is False:
        return records
    try:
        import pandas as pd
    except ImportError:
        if as_frame:
            raise
        return records
    return pd.DataFrame.from_records(records)
