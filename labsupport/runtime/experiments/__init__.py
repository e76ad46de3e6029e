"""The harness that runs the core's algorithms on the ranks, and times them.

* :mod:`~labsupport.runtime.experiments.workload` - what is trained: a model, its data,
  its optimizer, the one-process baseline; emulated accelerator compute.
* :mod:`~labsupport.runtime.experiments.ddp_runs` - train, time and count the traffic of
  the DDP versions (:mod:`labsupport.ddp`) on the ranks.
* :mod:`~labsupport.runtime.experiments.compression_runs` - train with a compression hook
  (:mod:`labsupport.compress`): loss, bytes and seconds per step.
* :mod:`~labsupport.runtime.experiments.sharding_runs` - ZeRO-1, 2, 3 and torch's FSDP2 on the
  ranks (:mod:`labsupport.sharding`): equality, memory, traffic, timelines (notebook 11).
* :mod:`~labsupport.runtime.experiments.scaling_runs` - steps on 1, 2, 4... ranks
  (:mod:`labsupport.scaling`'s model, measured).
"""
