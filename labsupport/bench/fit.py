"""Fit the α-β model to measured times (kept here for old imports).

The fit lives in :mod:`labsupport.costmodel` (its "Fitting alpha and beta"
block), next to the closed forms it fits, so that the benchmark and the
plots both import it from below. ``from labsupport.bench.fit import
fit_alpha_beta`` keeps working.
"""

from labsupport.costmodel import (
    DEFAULT_ALGORITHM,
    NATIVE_IN_PLACE,
    AlphaBetaFit,
    fit_alpha_beta,
    select_rows,
)
from labsupport.costmodel import FIT_MODELS as MODELS
from labsupport.costmodel import fit_model as model

__all__ = [
    "DEFAULT_ALGORITHM",
    "MODELS",
    "NATIVE_IN_PLACE",
    "AlphaBetaFit",
    "fit_alpha_beta",
    "model",
    "select_rows",
]
