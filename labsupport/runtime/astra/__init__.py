"""ASTRA-sim's input files, and the ASTRA-sim-compatible mode that gives its own times.

Skip on a first reading: the course's topology simulator is the teaching core's
:mod:`labsupport.topology`; this package speaks ASTRA-sim's formats so that the same
network can be run there (and gives ASTRA-sim's times for ASTRA-sim's inputs)::

    from labsupport.runtime import astra
    topo = astra.from_astra_sim("network.yml")    # an ASTRA-sim analytical config (or a dict)
    astra.to_astra_sim(topo)                      # and back
    sysc = astra.from_astra_system("system.json") # its system layer (to_astra_system back)
    astra.simulate_astra(topo, sysc, "all_reduce", 2**26).report()  # ASTRA-sim's own times

From the command line: ``python -m labsupport.runtime.astra NETWORK.yml SYSTEM.json``.
Modules: ``files`` (network YAML in and out), ``system`` (system JSON in and out), ``mode``
(ASTRA-sim's system layer), ``streams`` and ``collectives`` (its algorithms), ``network``
(its analytical backends).
"""

from labsupport.runtime.astra.files import from_astra_sim, to_astra_sim
from labsupport.runtime.astra.mode import AstraResult, simulate_astra
from labsupport.runtime.astra.system import SystemConfig, from_astra_system, to_astra_system

__all__ = [
    "AstraResult",
    "SystemConfig",
    "from_astra_sim",
    "from_astra_system",
    "simulate_astra",
    "to_astra_sim",
    "to_astra_system",
]
