"""The launcher: a persistent group of local ranks behind ``Cluster`` and ``%%ranks``.

Modules, one job each:

* ``cluster``   - the public ``Cluster``: runs cells, reports, replaces failed groups;
* ``options``   - the start-up options, and each rank's environment;
* ``group``     - one group of N ranks: start, wait until ready, stop;
* ``process``   - one rank's process: spawn, signal, kill with its children;
* ``protocol``  - one request to every rank and its replies (timeouts, interrupts);
* ``output``    - reading one rank's output, bounded; ``streaming`` - showing it;
* ``worker``    - the rank itself; ``stacks`` - where a hung rank is blocked;
* ``errors``    - what a cell can raise.
"""

from labsupport.runtime.backend import rank_device
from labsupport.runtime.launch.cluster import Cluster, current_cluster, run
from labsupport.runtime.launch.errors import (
    CellInterrupted,
    ClusterStopped,
    CollectiveTimeout,
    LabError,
    RankError,
    RemoteError,
)

__all__ = [
    "CellInterrupted",
    "Cluster",
    "ClusterStopped",
    "CollectiveTimeout",
    "LabError",
    "RankError",
    "RemoteError",
    "current_cluster",
    "rank_device",
    "run",
]
