"""The network model: links (latency, bandwidth), networks of them, a schedule's time on paper.

Start with ``link``, then ``network``, then ``simulate``; ``plans`` says which schedule
each algorithm runs (each import below says what its module holds)::

    from labsupport import netem
    net = netem.Network(intra=netem.Link(200e-6, 400e6), inter=netem.Link(1e-3, 50e6),
                        ranks_per_node=2, algorithm="ring")   # seconds; bytes per second
"""

from __future__ import annotations

# link: one message costs latency + bytes / bandwidth, one at a time per direction.
from labsupport import _moved  # the old names' aliases (one release)
from labsupport.netem.link import Link, LinkClock

# network: ranks on nodes, a full mesh inside a node, one NIC per rank between nodes.
# Real torch.distributed code runs on this model through the runtime's emulator
# (labsupport.runtime.emulator: the emulated clock, the "netem" process group); its
# docstring says what is emulated, what is real and what is not modelled. There:
# cluster = lab.Cluster(4, network=net), or a preset: network="two-nodes".
from labsupport.netem.network import (
    ALGO_ENV,
    ALGORITHMS,
    NETWORK_ENV,
    PRESETS,
    Network,
    check_algorithm,
    resolve,
)

# plans: which schedule each algorithm runs.
from labsupport.netem.plans import schedule_for

# simulate: a schedule played through the links, no processes.
from labsupport.netem.simulate import calls_time, model_time, simulate_on_network

presets = PRESETS


__all__ = [
    "ALGORITHMS",
    "ALGO_ENV",
    "NETWORK_ENV",
    "PRESETS",
    "Link",
    "LinkClock",
    "Network",
    "calls_time",
    "check_algorithm",
    "model_time",
    "presets",
    "resolve",
    "schedule_for",
    "simulate_on_network",
]


def __getattr__(name: str) -> object:
    """Names this package exported before the split into core and runtime (one release)."""
    return _moved.attribute(__name__, name)
