"""Three ways to run the same measurement.

* :func:`benchmark` with a ``Cluster`` (notebooks): the kernel asks every rank
  to measure one size at a time, prints each table line as it arrives, and
  returns the results as data.
* :func:`benchmark` without one, inside a rank (``%%ranks``, ``cluster.run``,
  your own torchrun script): every rank runs the sweep, rank 0 prints.
* :func:`run_torchrun` (``torchrun ... -m labsupport.runtime.bench``, or ``srun python -m
  labsupport.runtime.bench`` in a Slurm job): joins the group from the launcher's
  environment (:mod:`labsupport.runtime.cluster_env`), nothing local-only, so it runs
  the same on one node or many.
"""

from __future__ import annotations

import sys
from typing import Any

import torch.distributed as dist

from labsupport.runtime.bench.core import Sweep, measure_size, run_sweep, start_sweep
from labsupport.runtime.bench.options import BenchOptions
from labsupport.runtime.bench.progress import Progress
from labsupport.runtime.bench.report import TablePrinter, to_frame, write_csv, write_json


def _size_note(nbytes: int) -> str:
    for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes}B"


def sweep_on_cluster(
    cluster: Any, options: BenchOptions, show: bool = True, timeout: float | None = None
) -> Sweep:
    """Run ``options`` on ``cluster``'s ranks, one size per call; print the table if ``show``."""
    printer = TablePrinter() if show else None
    sweep: Sweep = cluster.call(start_sweep, (options,), timeout=timeout)[0]
    sizes = options.sizes()
    progress = Progress(len(sizes), options.collective)
    if printer:
        printer.start(sweep)
    for nbytes in sizes:
        progress.draw(_size_note(nbytes))
        pair = cluster.call(measure_size, (options, nbytes), timeout=timeout)[0]
        sweep.results.extend(pair)
        progress.clear()
        if printer:
            printer.row(*pair)
        progress.advance()
    progress.close()
    if printer:
        printer.end(sweep)
    return sweep


def sweep_here(options: BenchOptions, show: bool = True) -> Sweep:
    """Run ``options`` on this rank of an existing group; rank 0 prints (and shows progress)."""
    lead = dist.get_rank() == 0
    printer = TablePrinter() if show and lead else None
    progress = Progress(len(options.sizes()), options.collective, enabled=None if lead else False)

    def on_start(sweep: Sweep) -> None:
        if printer:
            printer.start(sweep)
        progress.draw()

    def on_row(oop: Any, ip: Any) -> None:
        progress.clear()
        if printer:
            printer.row(oop, ip)
        progress.advance()

    sweep = run_sweep(options, on_start=on_start, on_row=on_row)
    progress.close()
    if printer:
        printer.end(sweep)
    return sweep


def benchmark(
    cluster: Any = None,
    collective: str = "all_reduce",
    *,
    show: bool = True,
    as_frame: bool | None = None,
    timeout: float | None = None,
    json: str | None = None,
    csv: str | None = None,
    **options: Any,
) -> Any:
    """Benchmark ``collective``; return the results (a DataFrame if pandas is installed).

    ``options`` are :class:`BenchOptions` fields (nccl-tests' long names):
    ``minbytes="1K", maxbytes="1M", stepfactor=4, iters=20, warmup_iters=5,
    check=1, datatype="float", op="sum", root=0, average=1``. With ``cluster``
    the kernel drives that cluster's ranks (``timeout`` is per size); without,
    call it on every rank of a running group (e.g. in a ``%%ranks`` cell).
    ``show`` prints nccl-tests' table; ``json`` / ``csv`` name files to save
    the results in (as ``--json`` / ``--csv`` do). Records have one entry per
    size and placement (out-of-place / in-place), see :class:`labsupport.runtime.bench.Result`.
    """
    opts = BenchOptions(collective=collective, **options)
    if cluster is not None:
        sweep = sweep_on_cluster(cluster, opts, show=show, timeout=timeout)
    else:
        sweep = sweep_here(opts, show=show)
    if json and (cluster is not None or dist.get_rank() == 0):
        write_json(json, sweep)
    if csv and (cluster is not None or dist.get_rank() == 0):
        write_csv(csv, sweep.results)
    return to_frame(sweep.results, as_frame)


def init_from_env(backend: str = "auto") -> bool:
    """Join the group torchrun or srun describes in the environment; False if one is already up.

    The rank and rendezvous come from :func:`labsupport.runtime.cluster_env.export`
    (torchrun's variables, else an srun task's, written back under torchrun's
    names). The backend is the launcher's choice
    (:func:`labsupport.runtime.backend.detect_backend`) for the ranks on *this* node
    (LOCAL_WORLD_SIZE), since devices are per node. Raises
    :class:`labsupport.runtime.cluster_env.NotLaunched` outside torchrun and srun.
    """
    if dist.is_initialized():
        return False
    from labsupport.runtime.cluster_env import NotLaunched, export
    from labsupport.runtime.scripts import init_group

    try:
        me = export()
    except NotLaunched as exc:
        raise NotLaunched(
            f"{str(exc).splitlines()[0]}\nStart the benchmark as\n"
            "  torchrun --standalone --nproc_per_node=N -m labsupport.runtime.bench ...\n"
            "  srun --ntasks=N python -m labsupport.runtime.bench ...   (in a Slurm job)\n"
            "or let it start its own local group:\n"
            "  python -m labsupport.runtime.bench --nproc N ..."
        ) from None
    init_group(me, backend)  # env:// rendezvous, as export() set it up
    return True


def run_torchrun(options: BenchOptions, backend: str = "auto") -> Sweep:
    """The torchrun entry: join the group, sweep, leave; rank 0 prints (see ``__main__``)."""
    started = init_from_env(backend)
    try:
        return sweep_here(options)
    finally:
        if started:
            dist.destroy_process_group()
            sys.stdout.flush()
