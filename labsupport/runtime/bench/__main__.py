"""Command line: nccl-tests' options, under torchrun or with a local group of its own.

    torchrun --standalone --nproc_per_node=2 -m labsupport.runtime.bench -b 1K -e 64K -f 4
    srun --ntasks=2 python -m labsupport.runtime.bench -b 1K -e 64K -f 4     # in a Slurm job
    python -m labsupport.runtime.bench --nproc 4 --collective all_gather -b 1K -e 1M -f 4
    python -m labsupport.runtime.bench --help

Exit status: 0 when every result was right, 1 when any ``#wrong`` is non-zero,
2 for bad options.
"""

from __future__ import annotations

import argparse
import os

from labsupport.reduce_ops import BY_NAME
from labsupport.runtime.bench.collectives import COLLECTIVES
from labsupport.runtime.bench.core import check_group
from labsupport.runtime.bench.options import DTYPES, BenchOptions
from labsupport.runtime.scripts import exit_now


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (nccl-tests' short and long option names where they exist)."""
    p = argparse.ArgumentParser(
        prog="python -m labsupport.runtime.bench",
        description="Benchmark a collective like nccl-tests: time, algbw, busbw, #wrong.",
        epilog="Sizes take K, M, G suffixes (powers of 1024); GB/s uses GB = 1e9 bytes.",
    )
    add = p.add_argument
    add("--collective", default="all_reduce", help=f"one of {', '.join(COLLECTIVES)}")
    add("-b", "--minbytes", default="1K", help="smallest size (default 1K)")
    add("-e", "--maxbytes", default="16M", help="largest size (default 16M)")
    add(
        "-f", "--stepfactor", type=float, default=None, help="multiply the size by this (default 2)"
    )
    add("-i", "--stepbytes", default=None, help="add this many bytes per step instead of -f")
    add("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    add("-w", "--warmup_iters", type=int, default=5, help="untimed iterations first (default 5)")
    add("-c", "--check", type=int, default=1, help="verification runs per size, 0 = none")
    add("-d", "--datatype", default="float", help=f"one of {', '.join(DTYPES)}")
    add("-o", "--op", default="sum", help=f"one of {', '.join(BY_NAME)}")
    add("-r", "--root", type=int, default=0, help="root rank of broadcast/reduce")
    add(
        "-a",
        "--average",
        type=int,
        default=1,
        help="time over ranks: 0 rank 0, 1 avg (default), 2 min, 3 max",
    )
    add(
        "--nproc",
        type=int,
        default=None,
        help="start a local group of this many ranks (instead of torchrun)",
    )
    add("--backend", default="auto", help="auto (default), hccl, nccl or gloo")
    add("--json", metavar="FILE", help="save the results (with per-iteration times) as JSON")
    add("--csv", metavar="FILE", help="save the results as CSV")
    add("--plot", metavar="FILE", help="save time and busbw against size, with the α-β fit")
    add("--timeout", type=float, default=300.0, help="--nproc: seconds allowed per size")
    add(
        "--inject-fault",
        type=int,
        default=0,
        metavar="K",
        help="corrupt K elements of rank 0's result before checking (tests #wrong)",
    )
    return p


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    """BenchOptions from parsed arguments (raises ValueError for bad values)."""
    return BenchOptions(
        collective=args.collective,
        minbytes=args.minbytes,
        maxbytes=args.maxbytes,
        stepfactor=args.stepfactor,
        stepbytes=args.stepbytes,
        iters=args.iters,
        warmup_iters=args.warmup_iters,
        check=args.check,
        datatype=args.datatype,
        op=args.op,
        root=args.root,
        average=args.average,
        inject_fault=args.inject_fault,
    )


def save(sweep, args: argparse.Namespace) -> None:  # noqa: ANN001 - a Sweep
    """Write the files asked for with --json, --csv, --plot."""
    from labsupport.runtime.bench import report

    if args.json:
        report.write_json(args.json, sweep)
    if args.csv:
        report.write_csv(args.csv, sweep.results)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from labsupport.runtime.viz.bandwidth import plot_bandwidth

        plot_bandwidth(sweep.results).savefig(args.plot, dpi=120, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    """Parse, run (torchrun or --nproc), print, save; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        options = options_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    if args.nproc is not None and args.nproc < 1:
        parser.error(f"--nproc must be at least 1; got {args.nproc}")
    from labsupport.runtime.bench import runner
    from labsupport.runtime.cluster_env import NotLaunched, from_environment

    if args.nproc is not None:
        nranks = args.nproc
    else:
        try:
            nranks = from_environment().world_size  # torchrun's WORLD_SIZE, or srun's
        except NotLaunched:
            nranks = 1  # runner.run_torchrun says how to start, below
    try:
        check_group(options, nranks)
    except ValueError as exc:
        parser.error(str(exc))

    if args.nproc is not None:
        from labsupport.runtime.launch import Cluster

        with Cluster(world_size=args.nproc, backend=args.backend, timeout=args.timeout) as cluster:
            sweep = runner.sweep_on_cluster(cluster, options)
        lead = True
    else:
        try:
            sweep = runner.run_torchrun(options, args.backend)
        except NotLaunched as exc:
            parser.error(str(exc))
        lead = os.environ.get("RANK", "0") == "0"  # init_from_env wrote RANK under srun too
    if lead:
        save(sweep, args)
    return 1 if sweep.wrong else 0


if __name__ == "__main__":
    exit_now(main())  # after destroy_process_group: see exit_now's docstring
