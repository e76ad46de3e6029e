"""A table that reads well anywhere: an HTML table in a notebook, aligned text elsewhere.

::

    from labsupport.runtime.viz import table
    rows = [{"ranks": 8, "flat ring": 0.04e-3, "hierarchical": 0.04e-3}, ...]
    table(rows, formats={"flat ring": format_time, "hierarchical": format_time})
    # as a cell's value: an HTML table; print(...) of it: aligned text (a terminal, a log)

A row is a dict (column name -> value) or a sequence (then name the ``columns``); a
DataFrame (anything with ``columns`` and ``to_dict("records")``) works as it is.
Numbers are right-aligned, text left-aligned; floats get 3 significant figures unless
``formats`` names a format spec (``".2f"``) or a function (``labsupport.units.format_time``)
for their column. A ``"\\n"`` in a column name splits the header over two lines, which
keeps wide tables narrow (``"hierarchical\\n1 MiB"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from numbers import Integral, Real
from typing import Any

Format = str | Callable[[Any], str]


class Table(str):
    """A table as aligned text (it *is* that str) that Jupyter shows as an HTML table."""

    columns: list[str]
    cells: list[list[str]]
    numeric: list[bool]
    title: str | None

    def __new__(
        cls,
        columns: Sequence[str],
        cells: Sequence[Sequence[str]],
        numeric: Sequence[bool],
        title: str | None = None,
    ) -> Table:
        """``cells``: already formatted text, one list per row; ``numeric``: right-align."""
        heads = [name.split("\n") for name in columns]
        height = max((len(h) for h in heads), default=1)
        heads = [[""] * (height - len(h)) + h for h in heads]  # bottom-aligned headers
        widths = [
            max([len(line) for line in head] + [len(row[i]) for row in cells])
            for i, head in enumerate(heads)
        ]

        def line(texts: Sequence[str]) -> str:
            parts = [
                t.rjust(w) if right else t.ljust(w)
                for t, w, right in zip(texts, widths, numeric, strict=True)
            ]
            return "  ".join(parts).rstrip()

        lines = [title] if title else []
        lines += [line([h[k] for h in heads]) for k in range(height)]
        lines.append("  ".join("-" * w for w in widths))
        lines += [line(row) for row in cells]
        table = super().__new__(cls, "\n".join(lines))
        table.columns, table.cells = list(columns), [list(r) for r in cells]
        table.numeric, table.title = list(numeric), title
        return table

    def _repr_html_(self) -> str:
        def align(i: int) -> str:
            side = "right" if self.numeric[i] else "left"
            return f' style="text-align:{side}; font-variant-numeric:tabular-nums"'

        html = ["<table>"]
        if self.title:
            html.append(f"<caption>{escape(self.title)}</caption>")
        heads = "".join(
            f"<th{align(i)}>{escape(name).replace(chr(10), '<br>')}</th>"
            for i, name in enumerate(self.columns)
        )
        html.append(f"<thead><tr>{heads}</tr></thead><tbody>")
        for row in self.cells:
            tds = "".join(f"<td{align(i)}>{escape(text)}</td>" for i, text in enumerate(row))
            html.append(f"<tr>{tds}</tr>")
        html.append("</tbody></table>")
        return "".join(html)

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(str(self))  # type: ignore[attr-defined] # the text, not a quoted repr


def _text(value: Any, fmt: Format | None) -> str:
    if value is None:
        return ""
    if fmt is not None:
        return fmt(value) if callable(fmt) else format(value, fmt)
    if isinstance(value, bool) or isinstance(value, Integral):
        return str(value)
    if isinstance(value, Real):
        return f"{float(value):.3g}"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def table(
    rows: Iterable[Mapping[str, Any] | Sequence[Any]] | Any,
    columns: Sequence[str] | None = None,
    *,
    formats: Mapping[str, Format] | None = None,
    title: str | None = None,
) -> Table:
    """A :class:`Table` of ``rows``: HTML in a notebook, aligned text when printed.

    ``rows``: dicts, sequences (with ``columns``), or a DataFrame. ``columns``: which
    columns, in which order (default: the keys of the rows, in order of appearance).
    ``formats``: per column, a format spec or a function from value to text.
    ``title``: a caption above the table.
    """
    if hasattr(rows, "columns") and hasattr(rows, "to_dict"):  # a DataFrame
        columns = list(columns) if columns is not None else [str(c) for c in rows.columns]
        rows = [{str(k): v for k, v in r.items()} for r in rows.to_dict("records")]
    rows = list(rows)
    if columns is None:
        if any(not isinstance(r, Mapping) for r in rows):
            raise TypeError("rows that are not dicts need their column names: columns=[...]")
        columns = list(dict.fromkeys(k for r in rows for k in r))
    columns = [str(c) for c in columns]
    records = []
    for r in rows:
        if isinstance(r, Mapping):
            records.append([r.get(c) for c in columns])
        elif len(r) != len(columns):
            raise ValueError(f"a row has {len(r)} values for {len(columns)} columns: {r!r}")
        else:
            records.append(list(r))
    formats = dict(formats or {})
    unknown = set(formats) - set(columns)
    if unknown:
        raise ValueError(f"formats names columns the table does not have: {sorted(unknown)}")
    cells = [
        [_text(v, formats.get(c)) for v, c in zip(rec, columns, strict=True)] for rec in records
    ]
    numeric = [
        all(_is_number(rec[i]) for rec in records if rec[i] is not None)
        and any(rec[i] is not None for rec in records)
        for i in range(len(columns))
    ]
    return Table(columns, cells, numeric, title)
