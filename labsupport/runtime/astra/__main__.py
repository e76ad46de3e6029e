"""ASTRA-sim's times for ASTRA-sim's input files, from the command line::

    python -m labsupport.runtime.astra NETWORK.yml SYSTEM.json --collective all_reduce --size 64M

Runs the ASTRA-sim-compatible mode on ASTRA-sim's own input files and prints each
NPU's ``sys[i] finished, N cycles`` line (ns, as ASTRA-sim's analytical backends
print them), then the course's breakdown: how long each dimension had a phase
running, and the busiest link.
"""

from __future__ import annotations

import argparse
import re
import sys

from labsupport.runtime.astra.mode import simulate_astra
from labsupport.runtime.astra.system import COLLECTIVES

_UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10,
    "KIB": 2**10,
    "M": 2**20,
    "MIB": 2**20,
    "G": 2**30,
    "GIB": 2**30,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
}


def parse_size(text: str) -> int:
    """Bytes from ``64M`` / ``64MiB`` (binary), ``64MB`` (decimal) or ``67108864``."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"size {text!r}: write bytes, or a number with K, M, G (x 2**10...) or KB, MB, GB"
        )
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def main(argv: list[str] | None = None) -> int:
    """``python -m labsupport.runtime.astra``: the command line; exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["astra"]:  # the old form, `python -m labsupport.topology astra ...`
        argv = argv[1:]
    parser = argparse.ArgumentParser(
        prog="python -m labsupport.runtime.astra",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("network", help="ASTRA-sim analytical network config (.yml)")
    parser.add_argument("system", help="ASTRA-sim system config (.json)")
    parser.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    parser.add_argument(
        "--size", type=parse_size, default=2**20, help="bytes per NPU (64M = 64 MiB)"
    )
    parser.add_argument(
        "--congestion-aware",
        action="store_true",
        help="ASTRA-sim's congestion-aware backend (1-D networks only)",
    )
    args = parser.parse_args(argv)
    try:
        result = simulate_astra(
            args.network,
            args.system,
            args.collective,
            args.size,
            congestion_aware=args.congestion_aware,
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
