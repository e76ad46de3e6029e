"""How much memory and time a notebook takes on this machine, with 2 or 4 ranks (the guide's table).

    python benchmarks/notebook_footprint.py notebooks/solutions/08_scaling_compression.ipynb \
        --ranks 2 4
    python benchmarks/notebook_footprint.py --smoke   # a two-cell notebook, 2 ranks: does it run?

Runs the notebook top to bottom in a fresh kernel (nbclient, the course's venv), once
per rank count (``RANKS = 4`` and ``%%ranks -n 4`` rewritten in a copy), while
sampling, twice a second, the memory of the kernel and every process under it (its
ranks, a standby group, torchrun launchers): the peak of their summed PSS (each
shared page counted once, the memory the machine gives up) and of their summed RSS
(what a task manager adds up). Prints one line per run, with the load average, since
a shared machine's time is not a laptop's.

``--smoke`` runs, instead of the notebooks named, a notebook of two cells written for it
(``%load_ext labsupport`` and ``RANKS = 4``, then a ``%%ranks -n 4`` cell that prints
each rank), at 2 ranks: it checks that the script runs end to end, in seconds, and exits
with status 1 if that notebook raised.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _sample(pid: int) -> tuple[int, int]:
    pss = rss = 0
    for proc in _tree(pid):
        try:
            info = proc.memory_full_info()
            pss += getattr(info, "pss", info.rss)
            rss += info.rss
        except psutil.Error:
            pass
    return pss, rss


#: The ``--smoke`` notebook's cells: what ``run`` rewrites, and a ``%%ranks`` cell.
SMOKE_CELLS = (
    "%load_ext labsupport\nRANKS = 4",
    "%%ranks -n 4\nprint(f'rank {rank} of {world_size}')",
)


def smoke_notebook(folder: Path) -> Path:
    """Write the ``--smoke`` notebook (:data:`SMOKE_CELLS`) in ``folder``; its path."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in SMOKE_CELLS])
    path = folder / "smoke.ipynb"
    nbformat.write(nb, path)
    return path


def run(path: Path, ranks: int) -> dict[str, float]:
    """Execute a copy of the notebook with ``ranks``; peak memory, seconds, errors."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = re.sub(r"^RANKS = \d+", f"RANKS = {ranks}", cell.source, flags=re.M)
            cell.source = re.sub(r"^%%ranks -n \d+", f"%%ranks -n {ranks}", cell.source)
    client = NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    peak = [0, 0]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            kernel = getattr(getattr(client, "km", None), "provisioner", None)
            pid = getattr(getattr(kernel, "process", None), "pid", None)
            if pid:
                pss, rss = _sample(pid)
                peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)

    thread = threading.Thread(target=watch, daemon=True)
    start = time.perf_counter()
    thread.start()
    try:
        client.execute()
    finally:
        done.set()
        thread.join()
    seconds = time.perf_counter() - start
    errors = [
        f"{o['ename']} in `{c.source.splitlines()[0][:60]}`"
        for c in nb.cells
        if c.cell_type == "code" and "raises-exception" not in c.metadata.get("tags", [])
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    return {"pss": peak[0] / 2**20, "rss": peak[1] / 2**20, "seconds": seconds, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    """Run each notebook at each world size; print its peak memory (status 1: --smoke raised)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--ranks", nargs="+", type=int, default=[2, 4])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a two-cell notebook written for it, at 2 ranks: check that it runs",
    )
    args = parser.parse_args(argv)
    if not args.notebooks and not args.smoke:
        parser.error("name at least one notebook (or --smoke)")
    print(f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.1f} GB")
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            args.notebooks, args.ranks = [smoke_notebook(Path(tmp))], [2]
        failed = False
        for path in args.notebooks:
            for ranks in args.ranks:
                before = os.getloadavg()[0]
                out = run(path, ranks)
                failed |= bool(out["errors"])
                print(
                    f"{path.stem}: {ranks} ranks: peak {out['pss']:.0f} MB (PSS; RSS summed "
                    f"{out['rss']:.0f} MB), {out['seconds']:.0f} s; load average {before:.1f} "
                    f"before, {os.getloadavg()[0]:.1f} after; unexpected errors: "
                    f"{'; '.join(out['errors']) or 'none'}",
                    flush=True,
                )
    return 1 if args.smoke and failed else 0


if __name__ == "__main__":
    sys.exit(main())
