"""Every shipped schedule builder by name, and which world sizes each accepts."""

from __future__ import annotations

from collections.abc import Callable

from labsupport.schedules.builders import (
    binomial_broadcast,
    binomial_reduce,
    direct_all_gather,
    direct_all_reduce,
    direct_reduce_scatter,
    naive_all_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    tree_all_reduce,
)
from labsupport.schedules.halving import (
    rabenseifner_all_reduce,
    recursive_doubling_all_gather,
    recursive_doubling_all_reduce,
    recursive_halving_reduce_scatter,
)
from labsupport.schedules.model import Schedule, ScheduleError
from labsupport.schedules.trees import double_binary_tree_all_reduce

#: Every shipped schedule builder that needs only the world size, by name.
BUILDERS: dict[str, Callable[[int], Schedule]] = {
    f.__name__: f
    for f in (
        ring_reduce_scatter,
        ring_all_gather,
        ring_all_reduce,
        direct_reduce_scatter,
        direct_all_gather,
        direct_all_reduce,
        naive_all_reduce,
        binomial_broadcast,
        binomial_reduce,
        tree_all_reduce,
        double_binary_tree_all_reduce,
        recursive_halving_reduce_scatter,
        recursive_doubling_all_gather,
        recursive_doubling_all_reduce,
        rabenseifner_all_reduce,
    )
}


def supports(builder: str | Callable[[int], Schedule], p: int) -> bool:
    """Whether a builder accepts world size ``p`` (some need a power of two)."""
    build = BUILDERS[builder] if isinstance(builder, str) else builder
    try:
        build(p)
    except ScheduleError:
        return False
    return True
