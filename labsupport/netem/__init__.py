"""An emulated network for real torch.distributed code: choose latency and bandwidth, see α-β.

::

    from labsupport import netem
    link = netem.Link(latency=1e-3, bandwidth=50e6)          # seconds; bytes per second
    net = netem.Network(intra=netem.Link(200e-6, 400e6), inter=link, ranks_per_node=2,
                        algorithm="ring")
    cluster = lab.Cluster(4, network=net)                    # or a preset: network="two-nodes"
    %%ranks -n 4 --network two-nodes

**The link model.** A message of b bytes on a link takes ``latency + b / bandwidth``
seconds; a link carries one message at a time in each direction (messages
queue); the receiver has the data only when it has fully arrived. Within a
node every ordered pair of ranks has its own link (a full mesh, as HCCS on an
8-NPU Ascend server or NVSwitch). Between nodes each rank has one NIC: all of a
rank's sends to other nodes share one outgoing link, all its receives from
other nodes share one incoming link. ``ranks_per_node=None`` is one node.

**What runs on it.** Point-to-point (send, recv, isend, irecv,
batch_isend_irecv; so the schedule engine and your own code) pays that cost,
isend staying asynchronous. The built-in collectives (all_reduce, broadcast,
reduce, all_gather, all_gather_into_tensor, reduce_scatter,
reduce_scatter_tensor, all_to_all, gather, scatter, barrier; so DDP) run a real
algorithm over the emulated links, chosen by ``algorithm`` or the LAB_ALGO
environment variable (as NCCL_ALGO and HCCL_ALGO choose): ring, tree,
recursive_doubling, rabenseifner, hierarchical, direct (HCCL's Mesh),
double_binary_tree (NCCL's tree), hierarchical_ring (see ``plans``). Results are
gloo's; only the time changes.

**Time.** Point-to-point messages start when you call send/isend (real time,
so your own computation between calls counts). Inside a built-in collective
the steps are chained on the emulated clock: a step starts when the previous
one ended plus the measured CPU time of its reductions (so γ is your CPU's),
and the emulator's own work (Python, gloo over loopback, waking threads) is
hidden as long as it is shorter than the wire time. ``wait()`` sleeps in your
own thread until the operation's emulated end: waiting is sleeping, not
spinning, so 4 ranks on 2 cores stay faithful.

**What it does not model.** The CPU cost of reductions is your machine's, not
a γ you choose; the host work of each step (Python, gloo over loopback, two
thread wake-ups on the receiving side) is hidden only while it is shorter
than the step's wire time, and every blocking call pays one wake-up of its
own thread at the end: tens of µs on an idle machine, milliseconds on a busy
one, which shows at small sizes; links are not shared with other jobs; there is no congestion
beyond the queues above, no packet loss, no protocol (NCCL's LL/Simple) and no
in-network reduction.

Modules: ``link`` (Link, LinkClock: the model), ``network`` (Network, presets),
``backend`` (the "netem" process group), ``work`` (the Work it returns), ``state`` (what a rank
knows; set_algorithm, set_network, traffic), ``plans`` (which schedule each
algorithm runs), ``algorithms`` (collectives over point-to-point),
``simulate`` (the same model on paper, no processes), ``cluster`` (checks for
``Cluster(network=...)``).
"""

from __future__ import annotations

import os

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
from labsupport.netem.simulate import model_time, simulate
from labsupport.netem.state import current_network, set_algorithm, set_network, traffic

presets = PRESETS

__all__ = [
    "ALGORITHMS",
    "ALGO_ENV",
    "NETWORK_ENV",
    "PRESETS",
    "Link",
    "LinkClock",
    "Network",
    "check_algorithm",
    "current_network",
    "install_from_env",
    "model_time",
    "presets",
    "register",
    "resolve",
    "schedule_for",
    "set_algorithm",
    "set_network",
    "simulate",
    "traffic",
]


def install_from_env() -> str | None:
    """In a rank, before init_process_group: register "netem" if $LABSUPPORT_NETWORK asks.

    Returns the backend name to initialise with ("netem"), or None when no
    network is requested (then nothing changes).
    """
    text = os.environ.get(NETWORK_ENV)
    if not text:
        return None
    from labsupport.netem.backend import register

    return register(Network.from_json(text), int(os.environ["WORLD_SIZE"]))


def __getattr__(name: str):  # noqa: ANN202 - register imports torch: load it on use
    if name == "register":
        from labsupport.netem.backend import register

        return register
    raise AttributeError(f"module 'labsupport.netem' has no attribute {name!r}")
