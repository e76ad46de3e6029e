"""The capstone (notebook 10): a tiny transformer trained data-parallel, checked step by step.

* :mod:`labsupport.runtime.capstone.model` - the workload: :class:`GPTConfig` (the model, the
  generated data, AdamW with two parameter groups), the chain's entropy rate.
* :mod:`labsupport.runtime.capstone.compare` - train next to the single-process baseline, step by
  step, element by element, and find the first step where the two differ.

Training, timing and traffic are :mod:`labsupport.ddp`'s, with ``cfg=GPTConfig()``.
"""

from labsupport.runtime.capstone.compare import (
    LOSS_RTOL,
    TOLERANCE,
    compare_steps,
    first_divergence,
    optimizer_view,
)
from labsupport.runtime.capstone.model import (
    GPTConfig,
    TinyTransformer,
    entropy_rate,
    initial_loss,
    transitions,
)

__all__ = [
    "LOSS_RTOL",
    "TOLERANCE",
    "GPTConfig",
    "TinyTransformer",
    "compare_steps",
    "entropy_rate",
    "first_divergence",
    "initial_loss",
    "optimizer_view",
    "transitions",
]
