"""Re-run solution notebooks top to bottom in place, outputs stored, their twins kept in step."""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import nbformat

from labkit.exercises.marks import render
from labkit.exercises.pairs import PAIRED, pair_difference, sync


def _current_env_kernel_manager():
    """A kernel manager that starts ipykernel with this very interpreter (like nbval's)."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class _CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="current environment",
                language="python",
            )

    return KernelManager(kernel_name="current-env", kernel_spec_manager=_CurrentEnv())


def execute(paths: list[Path], timeout: float = 600.0) -> None:
    """Re-run each solution notebook top to bottom in place, then bring its .py twin in step."""
    # Stored outputs in rank order, whatever the machine's speed (no live streaming):
    # the kernels started below inherit this; our own environment is restored after.
    saved = os.environ.get("LABSUPPORT_LIVE_AFTER")
    os.environ.setdefault("LABSUPPORT_LIVE_AFTER", "inf")
    try:
        _execute_each(paths, timeout)
    finally:
        if saved is None:
            os.environ.pop("LABSUPPORT_LIVE_AFTER", None)


def _execute_each(paths: list[Path], timeout: float) -> None:
    from nbclient import NotebookClient

    for path in paths:
        path = Path(path).with_suffix(".ipynb")
        print(f"executing {path}")
        sync(path)  # the newer of the pair gives the cells
        nb = nbformat.read(path, as_version=4)
        kernelspec = copy.deepcopy(nb.metadata.get("kernelspec"))
        client = NotebookClient(
            nb,
            timeout=timeout,
            km=_current_env_kernel_manager(),
            record_timing=False,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        client.execute()
        if kernelspec is not None:
            nb.metadata["kernelspec"] = kernelspec
        nb.metadata.setdefault("jupytext", {})["formats"] = PAIRED
        path.write_text(render(nb), encoding="utf-8")
        if pair_difference(path):
            sync(path)
            print(f"  rewrote {path.with_suffix('.py').name} to match")


# ---------------------------------------------------------------------------- CLI
