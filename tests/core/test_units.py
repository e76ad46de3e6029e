"""labsupport.units: numbers printed to 3 significant figures in a unit that fits."""

from __future__ import annotations

import pytest

from labsupport.units import engineering, format_rate, format_size, format_time


def test_times_rates_and_sizes_read_with_three_figures():
    assert format_time(1e-3) == "1 ms"
    assert format_time(200e-6) == "200 µs"
    assert format_time(0.0012345) == "1.23 ms"
    assert format_time(999.96e-6) == "1 ms"  # not "1000 µs"
    assert format_time(0) == "0 s"
    assert format_rate(83_273_200.0) == "83.3 MB/s"  # was "83.2732 MB/s"
    assert format_rate(0.372529 * 2**30) == "400 MB/s"
    assert format_rate(56e9) == "56 GB/s"
    assert format_size(256 << 20) == "256 MiB"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(1024) == "1 KiB"


@pytest.mark.parametrize(
    "value, text",
    [(50e6, "50e6"), (200e-6, "200e-6"), (1e-3, "1e-3"), (1.5, "1.5"), (0.0, "0"),
     (82_855_234.56, "82.85523456e6"), (-3e6, "-3e6"), (5e-324, "5e-324")],
)  # fmt: skip
def test_engineering_notation_is_exact(value, text):
    assert engineering(value) == text
    assert float(text) == value
