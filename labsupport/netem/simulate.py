"""The link model on paper: how long a schedule takes on a network, without running it.

:func:`simulate` plays a schedule's steps through a :class:`LinkClock`
exactly as the emulated ranks do: each rank starts a step when it has finished
the previous one, sends its messages at that moment (each queued on its link),
and finishes the step when its sends have left and its receives have arrived.
It models communication only (no CPU time), so it is what the emulation should
measure, give or take the CPU work.

On a network where every rank sends and receives at most one message per step
(ring, tree, recursive doubling, Rabenseifner) this gives back the α-β closed
forms of :mod:`labsupport.costmodel` with α = latency, β = 1/bandwidth. It
differs where the network does: a full mesh lets a rank drive several links at
once (the naive root all-reduce is then cheaper than the one-port model says),
and a shared NIC makes messages queue.
"""

from __future__ import annotations

import numpy as np

from labsupport.netem.network import Network
from labsupport.netem.plans import SCHEDULED, schedule_for
from labsupport.schedules import Schedule, chunk_bounds


def step_bytes(schedule: Schedule, nbytes: int, itemsize: int = 1) -> np.ndarray:
    """Bytes in each chunk when an ``nbytes`` buffer of ``itemsize``-byte elements is cut."""
    return np.diff(chunk_bounds(nbytes // itemsize, schedule.num_chunks)) * itemsize


def simulate(schedule: Schedule, nbytes: int, network: Network, itemsize: int = 4) -> np.ndarray:
    """When each rank finishes ``schedule`` on an ``nbytes`` buffer (s, from a common start)."""
    p = schedule.world_size
    network.validate(p)
    clock = network.clock(p)
    sizes = np.concatenate([[0], np.cumsum(step_bytes(schedule, nbytes, itemsize))])
    ready = np.zeros(p)
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
    return float(simulate(sched, nbytes, network, itemsize).max())


def calls_time(
    calls: list[tuple[str, str, int]], world_size: int, network: Network, itemsize: int = 4
) -> float:
    """What the link model says a sequence of collectives costs, one after the other.

    ``calls`` as :func:`labsupport.netem.recording` collects them; each is costed
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
