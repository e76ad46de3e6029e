"""Numbers a person reads: a time, a rate, a size, to 3 significant figures in a unit that fits.

::

    format_time(1e-3)          # '1 ms'
    format_time(200e-6)        # '200 µs'
    format_rate(82_855_234.5)  # '82.9 MB/s'    (decimal units: MB = 1e6 bytes)
    format_size(3 << 20)       # '3 MiB'        (binary units, as message sizes are)
    engineering(50e6)          # '50e6'         (exact: float('50e6') == 50e6)

Three figures say what a reader needs ("52.2 GB/s", not "52.1541 GB/s"); the exact
value stays in the object and in its ``repr``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

_TIME = (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0))
_RATE = (("B/s", 1.0), ("kB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12))
_SIZE = (("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40))


def _figures(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant figures, never in exponent form."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    places = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scaled(value: float, units: Sequence[tuple[str, float]], digits: int) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {next(name for name, size in units if size == 1)}"
    i = max([0] + [k for k, (_, size) in enumerate(units) if abs(value) >= size])
    mantissa = float(f"{value / units[i][1]:.{digits}g}")
    if i + 1 < len(units) and abs(mantissa) * units[i][1] >= units[i + 1][1]:
        i += 1  # 999.96 µs is 1000 µs to 3 figures: say 1 ms
        mantissa = float(f"{value / units[i][1]:.{digits}g}")
    return f"{_figures(mantissa, digits)} {units[i][0]}"


def format_time(seconds: float, digits: int = 3) -> str:
    """A duration in ns, µs, ms or s: ``format_time(0.0012)`` is ``'1.2 ms'``."""
    return _scaled(seconds, _TIME, digits)


def format_rate(bytes_per_s: float, digits: int = 3) -> str:
    """Bytes per second in B/s, kB/s, MB/s, GB/s (decimal, as data sheets and nccl-tests)."""
    return _scaled(bytes_per_s, _RATE, digits)


def format_size(nbytes: float, digits: int = 3) -> str:
    """A size in B, KiB, MiB, GiB (binary, as message sizes are powers of two)."""
    return _scaled(nbytes, _SIZE, digits)


def engineering(value: float) -> str:
    """``value`` exactly, with an exponent that is a multiple of 3: 50e6, 200e-6, 1.5, 0."""
    if value == 0 or not math.isfinite(value) or 1 <= abs(value) < 1000:
        return repr(value).removesuffix(".0") if math.isfinite(value) else repr(value)
    exponent = 3 * math.floor(math.log10(abs(value)) / 3)
    mantissa = Decimal(repr(value)).scaleb(-exponent).normalize()
    text = f"{mantissa:f}"
    return f"{text}e{exponent}"
