"""labsupport.runtime.viz.table: HTML in a notebook, aligned text when printed."""

from __future__ import annotations

import pytest

from labsupport.runtime.viz import table
from labsupport.units import format_time

ROWS = [
    {"ranks": 8, "flat ring\n1 MiB": 0.04e-3, "algorithm": "ring"},
    {"ranks": 1024, "flat ring\n1 MiB": 11.37e-3, "algorithm": "hierarchical"},
]


def test_printed_it_is_aligned_text_with_numbers_on_the_right():
    t = table(ROWS, formats={"flat ring\n1 MiB": format_time}, title="all-reduce")
    assert str(t).splitlines() == [
        "all-reduce",
        "       flat ring",
        "ranks      1 MiB  algorithm",
        "-----  ---------  ------------",
        "    8      40 µs  ring",
        " 1024    11.4 ms  hierarchical",
    ]


def test_in_a_notebook_it_is_an_html_table():
    html = table(ROWS, title="a < b")._repr_html_()
    assert html.startswith("<table><caption>a &lt; b</caption>")
    assert '<th style="text-align:right' in html and "flat ring<br>1 MiB</th>" in html
    assert html.count("<tr>") == 3 and ">0.04<" not in html and ">4e-05<" in html
    assert '<td style="text-align:left; font-variant-numeric:tabular-nums">ring</td>' in html


def test_rows_as_sequences_or_a_dataframe_like():
    class Frame:
        columns = ["a", "b"]

        def to_dict(self, orient):
            assert orient == "records"
            return [{"a": 1, "b": None}, {"a": 2, "b": 0.5}]

    assert str(table(Frame())) == str(table([[1, None], [2, 0.5]], columns=["a", "b"]))
    with pytest.raises(TypeError, match="columns="):
        table([[1, 2]])
    with pytest.raises(ValueError, match="2 values for 3 columns"):
        table([[1, 2]], columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="does not have"):
        table(ROWS, formats={"nope": ".2f"})
