"""A difference that is rounding noise, said in words that rounding cannot change.

Two computations that do the same arithmetic in another order (4 ranks against one
process, AVX-512 kernels against AVX2's) agree to rounding, not bit for bit, and the
last digits of their difference depend on the machine: the vector width, MKL's and
oneDNN's dispatch. Printed as a number (``1.3e-07`` here, ``1.1e-07`` on another CPU),
it makes a stored output that another machine does not reproduce, for a lesson (the
two agree to rounding) that holds on both.

:func:`agreement` says such a difference as a verdict against the graders' own
tolerances (:data:`~labsupport.runtime.capstone.LOSS_RTOL` for a relative difference,
the absolute part of :data:`~labsupport.runtime.capstone.TOLERANCE` for an absolute
one), so that what a notebook prints and what a grader decides cannot disagree. It
prints the number only where it is the news: above those tolerances (and above
``below``'s scale, when one is given).
"""

from __future__ import annotations

from typing import Any

import torch

from labsupport.runtime.capstone import LOSS_RTOL, TOLERANCE


def _dtype(dtype: Any) -> torch.dtype:
    """A torch dtype from a dtype or its name ("torch.float32", "float32")."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return getattr(torch, str(dtype).replace("torch.", ""))


def tolerances(dtype: Any = torch.float32) -> tuple[float, float, float]:
    """The graders' (rtol, atol) for an element and their relative bound for a loss.

    For ``dtype`` (a dtype or its name); float32's for a dtype they have none for.
    """
    dt = _dtype(dtype)
    rtol, atol = TOLERANCE.get(dt, TOLERANCE[torch.float32])
    return rtol, atol, LOSS_RTOL.get(dt, LOSS_RTOL[torch.float32])


def rounding_bound(dtype: Any = torch.float32, relative: bool = True) -> float:
    """The largest difference the graders accept as rounding: LOSS_RTOL, or TOLERANCE's atol."""
    _, atol, loss_rtol = tolerances(dtype)
    return loss_rtol if relative else atol


def agreement(
    diff: float,
    dtype: Any = torch.float32,
    *,
    relative: bool = True,
    below: tuple[float, str] | None = None,
) -> str:
    """The largest difference between two computations, in words rounding cannot change.

    ``diff``: the largest difference, relative (``|a - b| / |b|``, the graders' rule for
    a loss) or, with ``relative=False``, absolute (compared with the absolute part of
    the graders' tolerance for a tensor, which holds whatever the size of the element).
    ``below``: a scale the difference is expected to stay under, as (value, name), e.g.
    ``(cfg.lr, "the learning rate")``. Returns one of

    * ``equal to float32 rounding (every difference within 1e-05 relative)``;
    * ``above float32 rounding (1e-05), below the learning rate (0.003)``;
    * ``2.4e-03 relative, above float32 rounding (1e-05)`` (the number: it is the news).
    """
    name = str(_dtype(dtype)).replace("torch.", "")
    bound = rounding_bound(dtype, relative)
    unit = " relative" if relative else ""
    if diff <= bound:
        return f"equal to {name} rounding (every difference within {bound:g}{unit})"
    if below is not None and diff < below[0]:
        return f"above {name} rounding ({bound:g}{unit}), below {below[1]} ({below[0]:g})"
    above = f" and {below[1]} ({below[0]:g})" if below is not None else ""
    return f"{diff:.1e}{unit}, above {name} rounding ({bound:g}{unit}){above}"
