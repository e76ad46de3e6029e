"""The solution notebooks' jupytext pairs: does a ``.ipynb`` agree with its py:percent twin,
and bring the two in step (jupytext's own ``--sync``: the newer file's cells win, the
``.ipynb`` keeps the outputs)."""

from __future__ import annotations

from pathlib import Path

import nbformat

PAIRED = "ipynb,py:percent"


def _cell_summary(nb: nbformat.NotebookNode) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", []))) for c in nb.cells]


def pair_difference(ipynb: Path) -> str | None:
    """Why ``ipynb`` and its py:percent twin disagree (cell types, sources, tags), or None."""
    import jupytext

    twin = ipynb.with_suffix(".py")
    if not twin.exists():
        return f"{twin} is missing (pair it: jupytext --set-formats ipynb,py:percent {ipynb})"
    a = _cell_summary(nbformat.read(ipynb, as_version=4))
    b = _cell_summary(jupytext.read(twin, fmt="py:percent"))
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"{ipynb.name} and {twin.name} differ at cell {index} ({x[1][:40]!r}...)"
    if len(a) != len(b):
        return f"{ipynb.name} has {len(a)} cells, {twin.name} has {len(b)}"
    return None


def sync(path: Path) -> None:
    """Pair ``path`` (``.ipynb`` or ``.py``) with its twin and sync them, as ``jupytext --sync``.

    The cells come from the newer file; outputs and cell ids from the ``.ipynb``. A missing
    ``.ipynb`` is made from the ``.py``.
    """
    from jupytext.cli import jupytext

    path = Path(path)
    source = path.with_suffix(".ipynb")
    if not source.exists():
        source = path.with_suffix(".py")
    if jupytext(["--set-formats", PAIRED, "--quiet", str(source)]) != 0:
        raise RuntimeError(f"jupytext could not sync {source}")
