"""Data parallelism as torch does it, by hand (notebooks 07 and 10).

Read in this order: ``buckets``, ``base``, ``versions``, ``zero``, ``predict`` (each
import below says what its module holds).
"""

# base: DDPBase, the plumbing of a wrapper as torch's DDP has it: broadcast at
# construction, hooks, gradients averaged when backward returns, no_sync, unused parameters.
from labsupport import _moved  # the old names' aliases (one release)
from labsupport.ddp.base import DDPBase

# buckets: torch's bucket rule (bucket_cap_mb in MiB).
from labsupport.ddp.buckets import (
    DEFAULT_BUCKET_CAP_MB,
    FIRST_BUCKET_BYTES,
    ONE_BUCKET,
    assign_buckets,
    bucket_caps,
    bucket_sizes,
    param_buckets,
)

# predict: the step-time model (StepModel), its bounds, the overlap inequality.
from labsupport.ddp.predict import (
    StepModel,
    bounds,
    bucket_timeline,
    hidden_fraction,
    network_for,
    predict_naive,
    predict_step,
)

# versions: Naive, Flat, Overlapped, Bucketed (nn.Module wrappers), and TorchDDP.
from labsupport.ddp.versions import Bucketed, Flat, Naive, Overlapped, TorchDDP

# zero: ZeRO1, a torch.optim.Optimizer with ZeroRedundancyOptimizer's constructor and the
# ZeRO paper's algorithm; what a rank holds (model_states).
from labsupport.ddp.zero import ZeRO1, ZeRO1Base, model_states

# The workload they train and the harness that trains and times them on the ranks are
# the runtime's (labsupport.runtime.experiments): nothing of it is exported here.
__all__ = [
    "DEFAULT_BUCKET_CAP_MB",
    "FIRST_BUCKET_BYTES",
    "ONE_BUCKET",
    "Bucketed",
    "DDPBase",
    "Flat",
    "Naive",
    "Overlapped",
    "StepModel",
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


def __getattr__(name: str) -> object:
    """Names this package exported before the split into core and runtime (one release)."""
    return _moved.attribute(__name__, name)
