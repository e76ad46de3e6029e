"""Data parallelism as torch does it, by hand (notebooks 07 and 10).

Read in this order:

* :mod:`~labsupport.ddp.buckets` - torch's bucket rule (``bucket_cap_mb`` in MiB).
* :mod:`~labsupport.ddp.base` - :class:`DDPBase`, the plumbing of a wrapper as torch's DDP
  has it: broadcast at construction, hooks, gradients averaged when backward returns,
  ``no_sync``, unused parameters.
* :mod:`~labsupport.ddp.versions` - :class:`Naive`, :class:`Flat`, :class:`Overlapped`,
  :class:`Bucketed` (``nn.Module`` wrappers), and :class:`TorchDDP`.
* :mod:`~labsupport.ddp.zero` - :class:`ZeRO1`, a ``torch.optim.Optimizer`` with
  ``ZeroRedundancyOptimizer``'s constructor and the ZeRO paper's algorithm; what a rank
  holds (:func:`model_states`).
* :mod:`~labsupport.ddp.predict` - the step-time model, its bounds, the overlap inequality.

The workload they train and the harness that trains and times them on the ranks are the
runtime's (:mod:`labsupport.runtime.experiments`).
"""

from labsupport.ddp.base import DDPBase
from labsupport.ddp.buckets import (
    DEFAULT_BUCKET_CAP_MB,
    FIRST_BUCKET_BYTES,
    ONE_BUCKET,
    assign_buckets,
    bucket_caps,
    bucket_sizes,
    param_buckets,
)
from labsupport.ddp.predict import (
    bounds,
    bucket_timeline,
    hidden_fraction,
    network_for,
    predict_naive,
    predict_step,
)
from labsupport.ddp.versions import Bucketed, Flat, Naive, Overlapped, TorchDDP
from labsupport.ddp.zero import ZeRO1, ZeRO1Base, model_states

__all__ = [
    "DEFAULT_BUCKET_CAP_MB",
    "FIRST_BUCKET_BYTES",
    "ONE_BUCKET",
    "Bucketed",
    "DDPBase",
    "Flat",
    "Naive",
    "Overlapped",
    "TorchDDP",
    "ZeRO1",
    "ZeRO1Base",
    "assign_buckets",
    "bounds",
    "bucket_caps",
    "bucket_sizes",
    "bucket_timeline",
    "hidden_fraction",
    "model_states",
    "network_for",
    "param_buckets",
    "predict_naive",
    "predict_step",
]
