"""A network: the links within and between nodes, how many ranks a node holds, an algorithm.

Start at :class:`Network`; :data:`PRESETS` are named ones, :func:`resolve` takes either.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace

from labsupport.netem.link import Link, LinkClock

#: The all-reduce algorithms the emulated collectives can run (``algorithm=``, LAB_ALGO);
#: :mod:`labsupport.netem.plans` says which schedule each one runs.
ALGORITHMS = (
    "ring",
    "tree",
    "recursive_doubling",
    "rabenseifner",
    "hierarchical",
    "direct",
    "double_binary_tree",
    "hierarchical_ring",
    "hierarchical_hd",
)
#: The environment variable that picks the algorithm when the network does not.
ALGO_ENV = "LAB_ALGO"
#: The environment variable that carries a network (as JSON) to the ranks.
NETWORK_ENV = "LABSUPPORT_NETWORK"


def check_algorithm(name: str) -> str:
    """``name`` if it is a known algorithm, else a ValueError listing the valid ones."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of: {', '.join(ALGORITHMS)}")
    return name


@dataclass(frozen=True, repr=False)
class Network:
    """Links within a node (``intra``) and between nodes (``inter``), and the algorithm::

        net = Network(intra=Link(100e-6, 400e6), inter=Link(1e-3, 50e6), ranks_per_node=2)
        net = resolve("two-nodes")          # a preset, by name
        net.validate(world_size=4)          # clear errors before any process starts

    ``algorithm`` is what the built-in collectives run (see
    :data:`ALGORITHMS`); None means the LAB_ALGO environment variable, or "ring".
    ``str(net)`` (and a notebook cell that ends with a Network) reads as a sentence;
    ``repr(net)`` is exact and pastes back as code, leaving out the fields left at None.
    """

    intra: Link | None = None
    inter: Link | None = None
    # None puts every rank on one node; 1 gives every rank a node of its own, so every
    # message goes through NICs (the one-port model of the α-β literature).
    ranks_per_node: int | None = None
    algorithm: str | None = None

    def __post_init__(self) -> None:
        for name in ("intra", "inter"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Link):
                raise TypeError(f"Network {name} must be a netem.Link or None; got {value!r}.")
        rpn = self.ranks_per_node
        if rpn is not None and (isinstance(rpn, bool) or not isinstance(rpn, int) or rpn < 1):
            raise ValueError(f"ranks_per_node must be a positive integer or None; got {rpn!r}.")
        if self.intra is None and self.inter is None:
            raise ValueError(
                "a Network needs at least one link: intra=Link(...) or inter=Link(...)"
            )
        if self.algorithm is not None:
            check_algorithm(self.algorithm)

    def nodes(self, world_size: int) -> int:
        """How many nodes ``world_size`` ranks fill."""
        return 1 if self.ranks_per_node is None else world_size // self.ranks_per_node

    def node_size(self, world_size: int) -> int:
        """Ranks per node for this world size."""
        return world_size if self.ranks_per_node is None else self.ranks_per_node

    def validate(self, world_size: int) -> Network:
        """Check that this network fits ``world_size`` ranks; return it (errors say what to do)."""
        rpn = self.node_size(world_size)
        if world_size % rpn:
            raise ValueError(
                f"ranks_per_node={rpn} does not divide the world size {world_size}: every node "
                f"must hold the same number of ranks (use a divisor of {world_size})."
            )
        if rpn > 1 and self.intra is None:
            raise ValueError(f"nodes of {rpn} ranks need an intra-node link: pass intra=Link(...)")
        if world_size > rpn and self.inter is None:
            raise ValueError(
                f"{world_size // rpn} nodes need an inter-node link: pass inter=Link(...)"
            )
        return self

    def clock(self, world_size: int) -> LinkClock:
        """A fresh :class:`LinkClock` for ``world_size`` ranks on this network."""
        rpn = self.node_size(world_size)
        # Ranks 0 .. rpn - 1 are node 0, the next rpn node 1, and so on (as torchrun numbers them).
        return LinkClock(lambda rank: rank // rpn, self.intra, self.inter)

    def resolved_algorithm(self) -> str:
        """The algorithm the collectives run: ``algorithm``, else $LAB_ALGO, else "ring"."""
        return check_algorithm(self.algorithm or os.environ.get(ALGO_ENV) or "ring")

    def with_(self, **changes) -> Network:  # noqa: ANN003 - Network fields
        """A copy with some fields changed (e.g. ``net.with_(algorithm="tree")``)."""
        return replace(self, **changes)

    def scaled(self, latency: float = 1.0, bandwidth: float = 1.0) -> Network:
        """A copy with every link's latency and bandwidth multiplied by these factors."""

        def scale(link: Link | None) -> Link | None:
            return link and Link(link.latency * latency, link.bandwidth * bandwidth)

        return replace(self, intra=scale(self.intra), inter=scale(self.inter))

    def to_json(self) -> str:
        """This network as JSON (how it travels to the ranks)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Network:
        """The network :meth:`to_json` wrote."""
        data = json.loads(text)
        for name in ("intra", "inter"):
            if data.get(name) is not None:
                data[name] = Link(**data[name])
        return cls(**data)

    def __str__(self) -> str:
        parts = []
        if self.intra is not None:
            parts.append(f"intra-node {self.intra}")
        if self.inter is not None:
            parts.append(f"inter-node {self.inter}")
        rpn = self.ranks_per_node
        if rpn is None:
            parts.append("all ranks on one node")
        else:
            parts.append(f"{rpn} rank{'s' if rpn > 1 else ''} per node")
        parts.append(f"algorithm {self.algorithm or 'from LAB_ALGO or ring'}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        fields = [
            f"{name}={value!r}"
            for name in ("intra", "inter", "ranks_per_node", "algorithm")
            if (value := getattr(self, name)) is not None
        ]
        return f"Network({', '.join(fields)})"

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(f"Network: {self}")  # type: ignore[attr-defined] # a notebook cell's value


#: Named networks. Times are scaled so that emulated time dominates a laptop's CPU cost.
PRESETS: dict[str, Network] = {
    # Every rank a machine of its own on a slow switched network: one NIC per rank.
    "slow-ethernet": Network(inter=Link(latency=1e-3, bandwidth=50e6), ranks_per_node=1),
    # One server whose ranks are joined by a full mesh (as HCCS or NVSwitch), slowed down.
    "one-node": Network(intra=Link(latency=200e-6, bandwidth=400e6)),
    # Nodes of 2 ranks (4 ranks = two nodes): a fast mesh inside, slow NICs between.
    "two-nodes": Network(
        intra=Link(latency=200e-6, bandwidth=400e6),
        inter=Link(latency=1e-3, bandwidth=50e6),
        ranks_per_node=2,
    ),
}


def resolve(network: Network | str | None) -> Network | None:
    """A :class:`Network` from a Network, a preset's name, or None (no emulation)."""
    if network is None or isinstance(network, Network):
        return network
    if isinstance(network, str):
        if network not in PRESETS:
            raise ValueError(
                f"unknown network preset {network!r}; choose one of: {', '.join(PRESETS)} "
                "(or pass a netem.Network)"
            )
        return PRESETS[network]
    raise TypeError(f"network must be a netem.Network, a preset's name or None; got {network!r}.")
