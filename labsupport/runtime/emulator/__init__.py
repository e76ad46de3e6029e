"""The emulated network's machinery: real torch.distributed code on :mod:`labsupport.netem`'s model.

::

    from labsupport import netem
    from labsupport.runtime import emulator
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
double_binary_tree (NCCL's tree), hierarchical_ring, hierarchical_hd (mesh inside,
halving-doubling across: HCCL's H-D_R at level 1; see ``plans``). Results are
gloo's; only the time changes.

**Time: what is emulated, what is real.** While a network is emulated, the
clock your code reads on a rank is an emulated one (:mod:`labsupport.runtime.emulator.clock`):
``time.perf_counter()``, ``perf_counter_ns()``, ``monotonic()`` and
``monotonic_ns()`` return it, so the timing code of the notebooks is the code
you would run on a cluster. Emulated: the clock. Real: the data, the results
(gloo's), and the CPU work, which costs its measured CPU time (the thread's
``time.thread_time()``, with torch on one intra-op thread per rank). A message
costs what its link says and carries its send time to the receiver; a
collective's steps chain on emulated time, each step's reductions adding their
CPU time (so γ is your CPU's); waiting for an operation moves the clock to its
end; torch.distributed's own Python around a call is not charged
(:mod:`labsupport.runtime.emulator.calls`: α is the link's latency, not your laptop's
Python). A rank waiting for a core, or for gloo over loopback, pays nothing, so the
times are the same on a quiet laptop and a busy one, and nothing sleeps through
wire time. ``time.sleep(x)`` still sleeps, and moves the clock by ``x``;
:func:`compute` moves it without sleeping (emulated accelerator work).
``time.time()``, the launcher's timeouts and hang detection, torch's store and
gloo stay on the real clock: a hang is still a hang.

**What it does not model.** The CPU cost of reductions is your machine's, not
a γ you choose; CPU time spent in threads other than the one that runs your
code (your own threads, torch's inter-op pool) is not counted; time a rank
spends blocked on something other than the network (a file, input) costs
nothing; links are not shared with other jobs; there is no congestion beyond
the queues above, no packet loss, no protocol (NCCL's LL/Simple) and no
in-network reduction. On an NPU or GPU, collectives are kernels that compete
with compute for the device; here compute and communication never slow each
other down.

Modules: ``clock`` (the emulated clock), ``calls`` (torch.distributed's Python,
uncharged), ``backend`` (the "netem" process group), ``wire`` (its stamped messages),
``work`` (the Work and Future it returns), ``state`` (what a rank knows; set_algorithm,
set_network, traffic, operations), ``algorithms`` (collectives over point-to-point), ``cluster``
(checks for ``Cluster(network=...)``). The model they implement (``Link``, ``Network``,
which schedule each algorithm runs, the same model on paper) is the teaching core's
:mod:`labsupport.netem`.
"""

from __future__ import annotations

import os

from labsupport.netem.network import NETWORK_ENV, Network
from labsupport.runtime.emulator.clock import compute
from labsupport.runtime.emulator.state import (
    Operation,
    current_network,
    operations,
    recording,
    set_algorithm,
    set_network,
    traffic,
)

__all__ = [
    "Operation",
    "compute",
    "current_network",
    "install_from_env",
    "operations",
    "recording",
    "register",
    "set_algorithm",
    "set_network",
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
    from labsupport.runtime.emulator.backend import register  # torch: only in a rank

    return register(Network.from_json(text), int(os.environ["WORLD_SIZE"]))


def __getattr__(name: str):
    if name == "register":  # the process group needs torch: loaded on first use
        from labsupport.runtime.emulator.backend import register

        return register
    raise AttributeError(f"module 'labsupport.runtime.emulator' has no attribute {name!r}")
