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
from labsupport.runtime.language import N_, _

#: The verdicts, whole, for a relative difference (True) and an absolute one (False):
#: ``dtype`` is float32 or another dtype's name; ``scale``, ``below``'s name (the caller's
#: words, e.g. "the learning rate"), and ``value``, its value.
_VERDICTS = {
    ("equal", True): N_("equal to {dtype} rounding (every difference within {bound:g} relative)"),
    ("equal", False): N_("equal to {dtype} rounding (every difference within {bound:g})"),
    # translators: {scale} is the notebook's own words for a quantity, e.g. "the learning rate"
    ("below", True): N_("above {dtype} rounding ({bound:g} relative), below {scale} ({value:g})"),
    ("below", False): N_("above {dtype} rounding ({bound:g}), below {scale} ({value:g})"),
    ("above", True): N_("{diff:.1e} relative, above {dtype} rounding ({bound:g} relative)"),
    ("above", False): N_("{diff:.1e}, above {dtype} rounding ({bound:g})"),
    ("above both", True): N_(
        "{diff:.1e} relative, above {dtype} rounding ({bound:g} relative) and {scale} ({value:g})"
    ),
    ("above both", False): N_(
        "{diff:.1e}, above {dtype} rounding ({bound:g}) and {scale} ({value:g})"
    ),
}


def _dtype(dtype: Any) -> torch.dtype:
    """A torch dtype from a dtype or its name ("torch.float32", "float32")."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = str(dtype).removeprefix("torch.")
    return getattr(torch, name)


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
    name = str(_dtype(dtype)).removeprefix("torch.")
    bound = rounding_bound(dtype, relative)
    value, scale = below if below is not None else (None, None)
    if diff <= bound:
        verdict = "equal"
    elif below is not None and diff < below[0]:
        verdict = "below"
    else:
        verdict = "above" if below is None else "above both"
    return _(_VERDICTS[verdict, relative]).format(
        dtype=name, bound=bound, diff=diff, scale=scale, value=value
    )
