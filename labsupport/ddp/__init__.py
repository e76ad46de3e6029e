"""Data-parallel training by hand, for notebook 07, ``examples/ddp_overlap.py`` and the benchmark.

* :mod:`labsupport.ddp.model` - the MLP, the synthetic data, the single-process baseline.
* :mod:`labsupport.ddp.versions` - naive, flat, overlapped, bucketed, torch DDP.
* :mod:`labsupport.ddp.run` - run a version on the ranks: train, time, compare, on the
  rank's device (NPU, GPU or CPU; the NPU and GPU paths not run on real hardware yet).
* :mod:`labsupport.ddp.predict` - the overlap inequality and a step-time model for buckets.
"""

from labsupport.ddp.model import (
    Config,
    baseline,
    global_batch,
    local_batch,
    loss_fn,
    make_model,
    make_optimizer,
)
from labsupport.ddp.predict import (
    bucket_timeline,
    hidden_fraction,
    network_for,
    predict_naive,
    predict_step,
)
from labsupport.ddp.run import (
    device_clock,
    setup,
    time_all_reduces,
    time_compute,
    time_steps,
    train,
    train_step,
    use_threads,
)
from labsupport.ddp.versions import (
    VERSIONS,
    Bucketed,
    Flat,
    Naive,
    Overlapped,
    TorchDDP,
    Version,
    bucket_bytes,
    make_buckets,
    make_version,
)

__all__ = [
    "VERSIONS",
    "Bucketed",
    "Config",
    "Flat",
    "Naive",
    "Overlapped",
    "TorchDDP",
    "Version",
    "baseline",
    "bucket_timeline",
    "device_clock",
    "hidden_fraction",
    "predict_naive",
    "predict_step",
    "global_batch",
    "local_batch",
    "loss_fn",
    "make_buckets",
    "make_model",
    "make_optimizer",
    "make_version",
    "network_for",
    "bucket_bytes",
    "setup",
    "time_all_reduces",
    "time_compute",
    "time_steps",
    "train",
    "train_step",
    "use_threads",
]
