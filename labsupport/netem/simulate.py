"""The link model on paper: how long a schedule takes on a network, without running it.

Start at :func:`simulate_on_network` (a schedule's steps played through a
:class:`~labsupport.netem.link.LinkClock`); :func:`model_time` and :func:`calls_time`
build on it.
"""

from __future__ import annotations

import numpy as np

from labsupport.netem.network import Network
from labsupport.netem.plans import SCHEDULED, schedule_for
from labsupport.schedules import Schedule, chunk_bounds


def step_bytes(schedule: Schedule, nbytes: int, itemsize: int = 1) -> np.ndarray:
    """Bytes in each chunk when an ``nbytes`` buffer of ``itemsize``-byte elements is cut."""
    return np.diff(chunk_bounds(nbytes // itemsize, schedule.num_chunks)) * itemsize


def simulate_on_network(
    schedule: Schedule, nbytes: int, network: Network, itemsize: int = 4
) -> np.ndarray:
    """When each rank finishes ``schedule`` on an ``nbytes`` buffer (s, from a common start).

    It plays the steps exactly as the emulated ranks do, and models communication only (no
    CPU time): it is what the emulation should measure, give or take the CPU work.

    On a network where every rank sends and receives at most one message per step (ring,
    trees, recursive doubling, Rabenseifner, the double binary tree) and every rank has
    one NIC (``ranks_per_node=1``, the one-port model), this gives back the α-β closed
    forms of :mod:`labsupport.costmodel` with α = latency, β = 1/bandwidth
    (tests/core/test_schedules_interpreters.py). It differs where the network does: a full
    mesh lets a rank drive several links at once (the direct algorithms and the naive
    root are then cheaper than the one-port model says: ``costmodel`` with
    ``ports="all"``), and a shared NIC makes messages queue.
    """
    p = schedule.world_size
    network.validate(p)
    clock = network.clock(p)
    sizes = np.concatenate([[0], np.cumsum(step_bytes(schedule, nbytes, itemsize))])
    ready = np.zeros(p)
    # Each rank starts a step when it has finished its previous one, sends its messages at
    # that moment (each queued on its link), and finishes the step when its sends have left
    # and its receives have arrived. One difference in kind: labsupport.costmodel and
    # labsupport.topology.simulate_on_topology let every step end when its slowest message
    # has arrived. They agree unless a rank that sat idle sends, and nothing holds its
    # message back: on a full mesh (no NIC queue at the receiver), a binomial tree for p not
    # a power of two or the double binary tree finishes up to one step earlier here.
    for step in schedule.steps:
        done = ready.copy()
        leaving = []
        for t in step:  # every send of the step first, at the time its sender starts the step
            size = sizes[t.chunks.stop] - sizes[t.chunks.start]
            if size == 0:
                continue
            left = clock.send(t.src, t.dst, size, ready[t.src])
            done[t.src] = max(done[t.src], left)
            leaving.append((t, size, left))
        for t, size, left in leaving:
            arrived = clock.receive(t.src, t.dst, size, left)
            done[t.dst] = max(done[t.dst], arrived)
        ready = done
    return ready


def model_time(
    collective: str,
    algorithm: str,
    nbytes: int,
    world_size: int,
    network: Network,
    itemsize: int = 4,
) -> float:
    """The modelled time of ``collective`` run by ``algorithm`` on ``network`` (slowest rank)."""
    sched = schedule_for(collective, algorithm, world_size, network.node_size(world_size))
    return float(simulate_on_network(sched, nbytes, network, itemsize).max())


def calls_time(
    calls: list[tuple[str, str, int]], world_size: int, network: Network, itemsize: int = 4
) -> float:
    """What the link model says a sequence of collectives costs, one after the other.

    ``calls`` as :func:`labsupport.runtime.emulator.recording` collects them; each is costed
    alone (:func:`model_time`), as if the network were idle when it starts.
    """
    total = 0.0
    for collective, algorithm, nbytes in calls:
        if collective not in SCHEDULED:
            raise ValueError(
                f"no link model for {collective!r} here; calls_time costs {', '.join(SCHEDULED)}"
            )
        total += model_time(collective, algorithm, nbytes, world_size, network, itemsize)
    return total
