"""labsupport: run notebook cells on N ranks, and the tools the course needs.

Public surface (the notebooks use these names)::

    import labsupport as lab
    lab.doctor()
    lab.detect_backend(world_size=4)
    cluster = lab.Cluster(world_size=4)
    cluster.run(fn) ; cluster.exec("print(rank)")
    lab.run(fn, world_size=4)
    lab.set_language("zh_CN")   # graders, errors, doctor() in Chinese
    %load_ext labsupport   # then %%ranks cells

The tools are modules, loaded on first use: ``lab.viz`` (pictures),
``lab.check`` (graders), ``lab.schedules`` and ``lab.costmodel`` (algorithms
as data and their cost), ``lab.bench`` (the nccl-tests style benchmark),
``lab.netem`` (an emulated network: choose latency and bandwidth),
``lab.topology`` (networks in ASTRA-sim's words, and a simulator),
``lab.trace`` (per-rank timelines of compute and communication), ``lab.ddp``
(data-parallel training written by hand, notebook 07), ``lab.sharding``
(ZeRO-2 and ZeRO-3, notebook 11), ``lab.scaling``
(scaling efficiency), ``lab.compress`` (gradient compression, notebook 08),
``lab.capstone`` (a tiny transformer trained with DDP or ZeRO-1, checked step by
step, notebook 10) and ``lab.parallel`` (tensor, sequence, pipeline and expert
parallelism, and layouts at scale, notebook 12).
"""

from labsupport import _moved
from labsupport.runtime.backend import BackendChoice, avoid_broken_autoload, detect_backend, doctor

avoid_broken_autoload()  # before anything imports torch (see its docstring)
from labsupport.runtime.language import set_language  # noqa: E402
from labsupport.runtime.launch import Cluster, CollectiveTimeout, RankError, current_cluster, run  # noqa: E402

_moved.install()  # old module paths still import, saying where they went (one release)

__all__ = [
    "BackendChoice",
    "Cluster",
    "CollectiveTimeout",
    "RankError",
    "current_cluster",
    "detect_backend",
    "doctor",
    "run",
    "set_language",
]


# Loaded on first use, so that `import labsupport` stays light: lab.viz, lab.netem, ...
# The teaching core (labsupport/README.md, the map), then the runtime's modules.
_CORE = (
    "compress",
    "costmodel",
    "ddp",
    "netem",
    "parallel",
    "scaling",
    "schedules",
    "sharding",
    "topology",
    "units",
)
_RUNTIME = ("astra", "bench", "capstone", "check", "emulator", "experiments", "trace", "viz")


def __getattr__(name: str):
    import importlib

    if name in _CORE:
        return importlib.import_module(f"labsupport.{name}")
    if name in _RUNTIME:
        return importlib.import_module(f"labsupport.runtime.{name}")
    raise AttributeError(f"module 'labsupport' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's own type
    """Register the ``%%ranks`` magic (``%load_ext labsupport``)."""
    from labsupport.runtime.magics import register

    register(ipython)
