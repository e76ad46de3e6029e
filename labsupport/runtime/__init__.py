"""The runtime: what runs the course's code on N ranks, measures it and shows it.

A learner rarely opens these files; the teaching core (``labsupport/README.md``, the
map) is what the notebooks teach. Here:

* ``launch/``, ``backend.py``, ``magics.py`` - the persistent group of N ranks behind
  ``%%ranks`` and :class:`~labsupport.runtime.launch.Cluster` (backend and device: hccl,
  nccl, gloo), per-rank output, timeouts with per-rank stacks, restart;
* ``emulator/`` - real torch.distributed code on the core's network model
  (:mod:`labsupport.netem`): the emulated clock, the "netem" process group;
* ``trace/``, ``viz/`` - per-rank timelines, and the pictures and widgets;
* ``experiments/``, ``capstone/`` - the harness that trains and times the core's
  versions on the ranks (workloads, DDP runs, compression, scaling);
* ``check/`` - the exercises' graders, which a learner calls from a notebook;
* ``bench/`` - the nccl-tests-compatible benchmark (``python -m labsupport.runtime.bench``),
  also under torchrun on a cluster; ``scripts.py``, ``cluster_env.py``, ``torchrun.py``,
  ``diagnose.py`` - what the torchrun and Slurm scripts and notebook 09 use;
* ``astra/`` - ASTRA-sim's input files, and the mode that gives ASTRA-sim's own times.

Imports point one way: the runtime imports the core, never the other way round.
"""
