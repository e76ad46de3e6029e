"""The launcher: a persistent group of local ranks behind ``Cluster`` and ``%%ranks``.

Modules, one job each: ``cluster`` (the kernel side), ``process`` (starting one
rank), ``worker`` (one rank), ``output`` (reading and printing each rank's
output), ``stacks`` (where a hung rank is blocked), ``errors`` (what a cell can
raise).
"""

from labsupport.backend import rank_device
from labsupport.launch.cluster import Cluster, current_cluster, run
from labsupport.launch.errors import CollectiveTimeout, LabError, RankError, RemoteError

__all__ = [
    "Cluster",
    "CollectiveTimeout",
    "LabError",
    "RankError",
    "RemoteError",
    "current_cluster",
    "rank_device",
    "run",
]
