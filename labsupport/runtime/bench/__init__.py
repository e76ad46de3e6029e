"""An nccl-tests-compatible benchmark for torch.distributed (gloo, HCCL, NCCL).

Three ways to run the same code::

    torchrun --nproc_per_node=8 -m labsupport.runtime.bench -b 8 -e 1G -f 2     # a real cluster
    python -m labsupport.runtime.bench --nproc 4 -b 1K -e 16M -f 4              # a local group
    df = bench.benchmark(cluster, "all_reduce", minbytes="1K", maxbytes="1M")  # a notebook

Modules: ``options`` (what to run), ``collectives`` (sizes, nccl-tests columns),
``cases`` (buffers, calls, checks), ``values`` (exact inputs and results), ``device``
(synchronize and per-iteration clocks), ``core`` (the timed loop, :func:`time_case`),
``report`` (table, JSON, CSV), ``runner`` (the three ways in), ``progress`` (a terminal
progress bar). The busbw factors and the α-β fit live in :mod:`labsupport.costmodel`
(re-exported here), so that
plots can use them without importing the benchmark.
"""

from labsupport.costmodel import AlphaBetaFit, fit_alpha_beta
from labsupport.runtime.bench.collectives import COLLECTIVES, busbw_factor
from labsupport.runtime.bench.core import Result, Sweep, run_sweep, time_case
from labsupport.runtime.bench.options import BenchOptions, parse_size
from labsupport.runtime.bench.report import (
    format_report,
    load_json,
    to_frame,
    write_csv,
    write_json,
)
from labsupport.runtime.bench.runner import benchmark
from labsupport.runtime.device import synchronize

__all__ = [
    "COLLECTIVES",
    "AlphaBetaFit",
    "BenchOptions",
    "Result",
    "Sweep",
    "benchmark",
    "busbw_factor",
    "fit_alpha_beta",
    "format_report",
    "load_json",
    "parse_size",
    "run_sweep",
    "synchronize",
    "time_case",
    "to_frame",
    "write_csv",
    "write_json",
]
