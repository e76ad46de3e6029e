"""What ``cluster.run`` returns: every rank's value in a list, shown as a notebook expects.

A :class:`RankValues` is a plain ``list`` (index = rank) in every way but one: in a
notebook, a cell that ends with ``cluster.run(f)`` where ``f`` returned None on every
rank shows nothing, as a cell that ends with a call returning None shows nothing,
instead of a stray ``[None, None, None, None]``. Any other values show as the list.
"""

from __future__ import annotations

from collections.abc import Callable


def _show_nothing() -> None:
    """IPython's display hook for a value that shows nothing."""


class RankValues(list):
    """Every rank's value, index = rank: a list that a notebook does not show when all are None."""

    __slots__ = ()

    @property
    def _ipython_display_(self) -> Callable[[], None] | None:
        # IPython calls this attribute, when it is callable, instead of showing the value;
        # when it is None, IPython shows the list as usual.
        return _show_nothing if all(value is None for value in self) else None
