"""Topologies in ASTRA-sim's words, and a simulator that runs any schedule on them.

::

    from labsupport import topology, schedules
    topo = topology.presets["ascend-a2-2x8"]         # 2 servers x 8 NPUs, sourced figures
    topo = topology.from_netem(network, 4)           # what a netem.Network emulates (to_netem back)
    result = topology.simulate_on_topology(schedules.ring_all_reduce(16), topo, 2**26)
    result.time, result.per_step, result.link_busy   # seconds; per step; busy seconds per link

Bandwidths are ASTRA-sim's GB/s, where **GB = 2**30 bytes**; latencies are ns per hop.
Read ``model``, ``routing``, ``simulate``, then ``presets`` (each import below says what
its module holds).
"""

# model: Dim, Topology, links.
from labsupport import _moved  # the old names' aliases (one release)
from labsupport.topology.model import GIB, KINDS, Dim, Links, Topology, gb_per_s

# presets: sourced hardware figures.
from labsupport.topology.presets import (
    ascend_a2,
    dgx_h100,
    from_netem,
    presets,
    to_netem,
    two_level,
)

# routing: which links a message crosses, the congestion-unaware cost.
from labsupport.topology.routing import Route, message_time, route

# simulate: schedules on a topology, with or without congestion. ASTRA-sim's file formats
# and its compatible mode are the runtime's (labsupport.runtime.astra).
from labsupport.topology.simulate import SimResult, simulate_on_topology

__all__ = [
    "GIB",
    "KINDS",
    "Dim",
    "Links",
    "Route",
    "SimResult",
    "Topology",
    "ascend_a2",
    "dgx_h100",
    "from_netem",
    "gb_per_s",
    "message_time",
    "presets",
    "route",
    "simulate_on_topology",
    "to_netem",
    "two_level",
]


def __getattr__(name: str) -> object:
    """Names this package exported before the split into core and runtime (one release)."""
    return _moved.attribute(__name__, name)
