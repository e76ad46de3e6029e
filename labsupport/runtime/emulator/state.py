"""What one rank knows about the emulated network, and the functions a rank calls to change it.

On a rank of a netem group::

    from labsupport import netem
    from labsupport.runtime import emulator
    emulator.set_algorithm("tree")        # every rank, between collectives
    emulator.set_network(net.scaled(latency=10))
    emulator.traffic()                    # {'bytes_sent': ..., 'messages_sent': ...}
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from labsupport.netem.network import Network, check_algorithm


class _State:
    """This process's view of the network: the links, their clock, what was sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.network: Network | None = None
        self.world_size = 1
        self.clock = None
        self.algorithm = "ring"
        self.bytes_sent = 0
        self.messages_sent = 0
        self.p2p_bytes_sent = 0  # of those, the bytes sent by send/isend (not by collectives)
        self.reduce_seconds = 0.0  # CPU time the collectives spent reducing (their γ term)
        #: Lists that :func:`recording` blocks collect the collectives called into.
        self.recorders: list[list[tuple[str, str, int]]] = []
        #: Lists that :func:`operations` blocks collect the executed operations into.
        self.operation_logs: list[list[Operation]] = []

    def configure(self, network: Network, world_size: int) -> None:
        with self.lock:
            self.network = network.validate(world_size)
            self.world_size = world_size
            self.clock = network.clock(world_size)
            self.algorithm = network.resolved_algorithm()


@dataclass
class Operation:
    """One operation the netem group executed, as the group saw it (times in emulated s).

    ``issued``: the calling thread's emulated time when it was called; ``end``: when its
    data was here (None until then); ``in_backward``: called inside an autograd node (a
    gradient hook); ``thread``: the calling thread's name.
    """

    name: str
    algorithm: str
    nbytes: int
    issued: float
    in_backward: bool
    thread: str
    end: float | None = None


STATE = _State()


# The two setters return None, as setters do: ``cluster.run(emulator.set_network, net)``
# ending a cell then shows nothing (the launcher shows no list of None), rather than a
# list of every rank's old network. To put one back later, keep current_network() first.


def set_algorithm(name: str) -> None:
    """On every rank: make the collectives run ``name`` from now on."""
    check_algorithm(name)
    with STATE.lock:
        STATE.algorithm = name


def set_network(network: Network) -> None:
    """On every rank, between operations: new links and algorithm (see current_network)."""
    STATE.configure(network, STATE.world_size)


def current_network() -> Network | None:
    """The network this process emulates (None outside a netem group)."""
    return STATE.network


@contextmanager
def recording() -> Iterator[list[tuple[str, str, int]]]:
    """The collectives this rank calls inside the block: (collective, algorithm, bytes).

    The bytes are the whole buffer's, as :func:`labsupport.netem.model_time` takes them
    (an all-gather's output, a reduce-scatter's input)::

        with emulator.recording() as calls:
            loss.backward()
        netem.calls_time(calls, world_size, net)   # what the link model says they cost
    """
    log: list[tuple[str, str, int]] = []
    with STATE.lock:
        STATE.recorders.append(log)
    try:
        yield log
    finally:
        with STATE.lock:
            STATE.recorders.remove(log)


@contextmanager
def operations() -> Iterator[list[Operation]]:
    """Every operation this rank's netem group executes inside the block, as it executes them.

    Recorded by the process group itself, whatever the caller's spelling
    (``dist.all_reduce``, ``from torch.distributed import all_reduce``, torch's DDP from
    C++, a comm hook's future): one :class:`Operation` per collective tensor, send and
    receive, with the emulated times it was issued and ended (a grader's record)::

        with emulator.operations() as ops:
            loss.backward()
        [(op.name, op.issued, op.end) for op in ops]
    """
    log: list[Operation] = []
    with STATE.lock:
        STATE.operation_logs.append(log)
    try:
        yield log
    finally:
        with STATE.lock:
            STATE.operation_logs.remove(log)


def traffic() -> dict[str, float]:
    """What this rank has sent on the emulated network so far: bytes and messages in all,
    the bytes of those sent by send/isend (``p2p_bytes_sent``) rather than collectives,
    and the CPU seconds its collectives spent reducing (``reduce_seconds``, the γ term
    the emulated times include)."""
    return {
        "bytes_sent": STATE.bytes_sent,
        "messages_sent": STATE.messages_sent,
        "p2p_bytes_sent": STATE.p2p_bytes_sent,
        "reduce_seconds": STATE.reduce_seconds,
    }
