"""Data parallelism as torch does it, by hand: notebooks 07 and 10, the examples, benchmarks.

* :mod:`~labsupport.ddp.model` - a workload (model, data, optimizer, the one-process
  baseline): :class:`Config` is notebook 07's MLP; emulated accelerator compute.
* :mod:`~labsupport.ddp.buckets` - torch's bucket rule (``bucket_cap_mb`` in MiB).
* :mod:`~labsupport.ddp.base` - :class:`DDPBase`, the plumbing of a wrapper as torch's DDP
  has it: broadcast at construction, hooks, gradients averaged when backward returns,
  ``no_sync``, unused parameters.
* :mod:`~labsupport.ddp.versions` - :class:`Naive`, :class:`Flat`, :class:`Overlapped`,
  :class:`Bucketed` (``nn.Module`` wrappers), and :class:`TorchDDP`.
* :mod:`~labsupport.ddp.zero` - :class:`ZeRO1`, a ``torch.optim.Optimizer`` with
  ``ZeroRedundancyOptimizer``'s constructor and the ZeRO paper's algorithm; what a rank
  holds (:func:`model_states`).
* :mod:`~labsupport.ddp.run` - train, time, count traffic on the ranks.
* :mod:`~labsupport.ddp.predict` - the step-time model, its bounds, the overlap inequality.
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
from labsupport.ddp.model import (
    Compute,
    Config,
    Workload,
    baseline,
    emulate_compute,
    global_batch,
    local_batch,
    loss_fn,
    make_model,
)
from labsupport.ddp.predict import (
    bounds,
    bucket_timeline,
    hidden_fraction,
    network_for,
    predict_naive,
    predict_step,
)
from labsupport.ddp.run import (
    VERSIONS,
    is_sharded_optimizer,
    setup,
    time_all_reduces,
    time_compute,
    time_steps,
    traffic_per_step,
    train,
    train_step,
    use_threads,
)
from labsupport.ddp.versions import Bucketed, Flat, Naive, Overlapped, TorchDDP
from labsupport.ddp.zero import ZeRO1, ZeRO1Base, model_states

__all__ = [
    "DEFAULT_BUCKET_CAP_MB",
    "FIRST_BUCKET_BYTES",
    "ONE_BUCKET",
    "VERSIONS",
    "Bucketed",
    "Compute",
    "Config",
    "DDPBase",
    "Flat",
    "Naive",
    "Overlapped",
    "TorchDDP",
    "Workload",
    "ZeRO1",
    "ZeRO1Base",
    "assign_buckets",
    "baseline",
    "bounds",
    "bucket_caps",
    "bucket_sizes",
    "bucket_timeline",
    "emulate_compute",
    "global_batch",
    "hidden_fraction",
    "is_sharded_optimizer",
    "local_batch",
    "loss_fn",
    "make_model",
    "model_states",
    "network_for",
    "param_buckets",
    "predict_naive",
    "predict_step",
    "setup",
    "time_all_reduces",
    "time_compute",
    "time_steps",
    "traffic_per_step",
    "train",
    "train_step",
    "use_threads",
]
