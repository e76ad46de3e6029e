"""The network model: links (latency, bandwidth), networks of them, a schedule's time on paper.

Start with :mod:`~labsupport.netem.link` (one message: ``latency + bytes / bandwidth``,
one at a time per direction), then :mod:`~labsupport.netem.network` (ranks on nodes:
a full mesh inside a node, one NIC per rank between nodes), then
:mod:`~labsupport.netem.simulate` (a schedule played through the links, no processes).
:mod:`~labsupport.netem.plans` says which schedule each algorithm runs.

::

    from labsupport import netem
    link = netem.Link(latency=1e-3, bandwidth=50e6)          # seconds; bytes per second
    net = netem.Network(intra=netem.Link(200e-6, 400e6), inter=link, ranks_per_node=2,
                        algorithm="ring")
    cluster = lab.Cluster(4, network=net)                    # or a preset: network="two-nodes"

Real torch.distributed code runs on this model through the runtime's emulator
(:mod:`labsupport.runtime.emulator`: the emulated clock, the "netem" process group);
its docstring says what is emulated, what is real and what is not modelled.
"""

from __future__ import annotations

from labsupport.netem.link import Link, LinkClock
from labsupport.netem.network import (
    ALGO_ENV,
    ALGORITHMS,
    NETWORK_ENV,
    PRESETS,
    Network,
    check_algorithm,
    resolve,
)
from labsupport.netem.plans import schedule_for
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
