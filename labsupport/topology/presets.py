"""Networks with figures from a named source, and nothing else.

Start at :data:`presets` (the ready-made ones); every figure has its source in the
topology's ``sources``.
"""

from __future__ import annotations

from labsupport.topology.model import Dim, Topology, gb_per_s

ASTRA_RING_SWITCH = (
    "ASTRA-sim tutorials, hoti2024/demo4/inputs/Ring_Switch.yml "
    "(topology [Ring, Switch], npus_count [4, 2], bandwidth [50, 10], latency [500, 2500])"
)
ASTRA_HGX_H100 = (
    "ASTRA-sim, examples/network/analytical/HGX-H100-validated.yml "
    "(Switch of 8 NPUs, 400 GB/s, 936.25 ns)"
)
A2_SERVER = "Huawei MindCluster deployer doc deployer_0025: Atlas 800T A2, 8 NPUs, 8 RoCE ports"
A2_CAPTURE = (
    "arthurchiao.art, 'gpu-advanced-notes-2' (2023): npu-smi info -t topo of an 8 x 910B host, "
    "HCCS between every NPU pair, 8 x 200 Gb/s RDMA NICs; its /etc/hccn.conf puts the 8 NIC "
    "addresses in one subnet behind one gateway"
)
A2_HCCS = (
    "arthurchiao.art 'gpu-data-sheets': HCCS 56 GB/s (392 GB/s one-to-many), direction not "
    "stated, in a column whose other rows are bidirectional (NVLink 900, PCIe Gen4 64); a blog: "
    "reported, not primary"
)
DGX_NIC = "NVIDIA DGX BasePOD reference architecture: DGX H100 has 8 x 400 Gb/s ConnectX-7"
# Where no source gives a figure (the per-hop latency of HCCS or RoCE, for example) the
# preset says so in its note and uses 0 ns, so that the simulation is bandwidth-only; give
# your own measured latencies with topo.with_latency. Bandwidths are in ASTRA-sim's GB/s
# (GB = 2**30 bytes): see gb_per_s.
NO_LATENCY = (
    "No source gives per-hop latencies for this hardware: latency is 0 ns (bandwidth only), "
    "flagged unknown. Use .with_latency(intra_ns, inter_ns) with figures you measured."
)
# Where a source leaves a reading open (the direction of the A2's reported HCCS figure, how
# its NICs are wired), both readings are offered and named.
#: The two readings of the reported 56 GB/s per HCCS link, as GB/s (10**9 B) per direction.
HCCS_READINGS = {"per_direction": 56.0, "bidirectional": 28.0}
#: How the RoCE NICs of A2 servers are joined (see :func:`ascend_a2`).
A2_WIRINGS = ("switch", "rail")


def ascend_a2(servers: int, wiring: str = "switch", hccs: str = "per_direction") -> Topology:
    """Atlas 800T A2 servers: 8 NPUs in a full HCCS mesh, one 200 Gb/s RoCE NIC per NPU.

    Dimension 0 is the HCCS mesh (FullyConnected); dimension 1 the RoCE NICs,
    one 200 Gb/s NIC per NPU, through switches. What the sources support:

    - ``wiring="switch"`` (the default): every NIC reaches every other NIC
      through the switches (``uplink="any"``: a message leaves through its own
      NPU's NIC and arrives at its destination's). The cited capture's
      /etc/hccn.conf puts all 8 NIC addresses in one subnet behind one gateway;
      no source found says NPU i reaches only NPU i of other servers.
    - ``wiring="rail"``: rail-optimised wiring, ASTRA-sim's model of a
      multi-dimensional network: NPU i's NIC reaches only NPU i of the other
      servers, so a message for another index first crosses its own server's
      HCCS (dimension-order routing). Labelled "-rail" in the name; only this
      wiring can be written to ASTRA-sim.
    - ``hccs``: the 56 GB/s per HCCS link is reported by a blog, without a
      direction, in a table whose other figures are bidirectional totals (NVLink
      900 GB/s, PCIe Gen4 x16 64 GB/s); 392 GB/s "one-to-many" is 7 x 56. No
      primary source settles it: ``"per_direction"`` reads 56 GB/s each way (the
      default, the course's earlier reading), ``"bidirectional"`` 28 GB/s each
      way. Compare both before you trust a number that depends on it.
    - Per-hop latencies: unknown, 0 ns (see ``note``).
    """
    if wiring not in A2_WIRINGS:
        raise ValueError(f"wiring must be one of {A2_WIRINGS}, not {wiring!r}")
    if hccs not in HCCS_READINGS:
        raise ValueError(f"hccs must be one of {tuple(HCCS_READINGS)}, not {hccs!r}")
    mesh = Dim("FullyConnected", 8, gb_per_s(HCCS_READINGS[hccs], "GB/s"), 0.0)
    roce = Dim("Switch", servers, gb_per_s(200, "Gb/s"), 0.0)
    name = f"ascend-a2-{servers}x8" + ("-rail" if wiring == "rail" else "")
    name += "" if hccs == "per_direction" else "-hccs-bidirectional"
    note = (
        f"{NO_LATENCY} HCCS {HCCS_READINGS[hccs]:g} GB/s per direction per link ({hccs} reading "
        f"of a reported 56 GB/s); RoCE wiring: {wiring}."
    )
    # one server sends nothing over RoCE: leave it rail-wired, as ASTRA-sim can read it
    uplink = "any" if wiring == "switch" and servers > 1 else "rail"
    return Topology((mesh, roce), name, (A2_SERVER, A2_CAPTURE, A2_HCCS), note, uplink=uplink)


def dgx_h100(servers: int) -> Topology:
    """DGX H100 servers: ASTRA-sim's validated NVSwitch dimension, 8 x 400 Gb/s NICs across.

    Dimension 0 is ASTRA-sim's HGX-H100-validated config (Switch, 8 GPUs,
    400 GB/s, 936.25 ns); dimension 1 joins GPU i of every server through a
    switch, one 400 Gb/s ConnectX-7 each (latency unknown: 0 ns).
    """
    nvswitch = Dim("Switch", 8, 400.0, 936.25)
    ib = Dim("Switch", servers, gb_per_s(400, "Gb/s"), 0.0)
    note = "Inter-server latency: no source, 0 ns. Use .with_latency(936.25, inter_ns)."
    return Topology((nvswitch, ib), f"dgx-h100-{servers}x8", (ASTRA_HGX_H100, DGX_NIC), note)


def two_level(
    nodes: int,
    per_node: int,
    intra: tuple[float, float],
    inter: tuple[float, float],
    name: str = "two-level",
    uplink: str = "rail",
) -> Topology:
    """``nodes`` nodes of ``per_node`` ranks, from (latency s, bandwidth bytes/s) per level.

    Inside a node every pair has its own link (FullyConnected); across nodes
    the ranks with the same local index are joined pairwise too, so each
    message costs exactly one latency plus bytes / bandwidth, as an emulated
    link that delays every message does. ``uplink="shared"``: each node has
    one inter-node link (its NPU 0's), which all its ranks share.
    """
    (lat1, bw1), (lat2, bw2) = intra, inter
    dims = (
        Dim("FullyConnected", per_node, bw1 / 2**30, lat1 * 1e9),
        Dim("FullyConnected", nodes, bw2 / 2**30, lat2 * 1e9),
    )
    return Topology(dims, name, note="Figures given by the caller.", uplink=uplink)


def from_netem(network, world_size: int) -> Topology:  # noqa: ANN001 - a labsupport.netem.Network
    """The topology that a ``labsupport.netem.Network`` emulates, for ``world_size`` ranks.

    netem gives every ordered pair of ranks in a node its own link
    (FullyConnected) and every rank one NIC to the other nodes: a message
    between nodes pays the inter link's latency once and its bandwidth on the
    sender's and the receiver's NIC. That is a Switch whose per-hop latency is
    half netem's (a Switch is 2 hops) with ``uplink="any"``.
    """
    k = network.node_size(world_size)
    m = world_size // k
    dims = []
    if network.intra is not None:
        dims.append(
            Dim("FullyConnected", k, network.intra.bandwidth / 2**30, network.intra.latency * 1e9)
        )
    else:
        dims.append(Dim("FullyConnected", k, 1.0, 0.0))  # one rank per node: never used
    if m > 1:
        inter = network.inter
        dims.append(Dim("Switch", m, inter.bandwidth / 2**30, inter.latency * 1e9 / 2))
    return Topology(tuple(dims), f"netem: {m} node(s) of {k}", note=str(network), uplink="any")


def to_netem(topo: Topology):  # noqa: ANN201 - a labsupport.netem.Network (imported lazily)
    """The ``labsupport.netem.Network`` that emulates ``topo`` (the inverse of :func:`from_netem`).

    Only what netem can emulate: a FullyConnected dimension 0 (one node) and, for
    several nodes, a Switch dimension 1 with ``uplink="any"``.
    """
    from labsupport.netem import Link, Network

    d0 = topo.dims[0]
    if d0.kind != "FullyConnected" or len(topo.dims) > 2:
        raise ValueError("netem emulates a FullyConnected node, optionally joined by one Switch")
    intra = Link(d0.latency * 1e-9, d0.bytes_per_s) if d0.npus > 1 else None
    if len(topo.dims) == 1:
        return Network(intra=intra)
    d1 = topo.dims[1]
    if d1.kind != "Switch" or topo.uplink != "any":
        raise ValueError('netem joins nodes by one NIC per rank: a Switch with uplink="any"')
    return Network(
        intra=intra, inter=Link(2 * d1.latency * 1e-9, d1.bytes_per_s), ranks_per_node=d0.npus
    )


#: Ready-made topologies, each figure with its source (see each one's ``sources``).
presets: dict[str, Topology] = {
    "astra-sim-ring-switch": Topology(
        (Dim("Ring", 4, 50.0, 500.0), Dim("Switch", 2, 10.0, 2500.0)),
        "astra-sim-ring-switch",
        (ASTRA_RING_SWITCH,),
    ),
    "hgx-h100-validated": Topology(
        (Dim("Switch", 8, 400.0, 936.25),), "hgx-h100-validated", (ASTRA_HGX_H100,)
    ),
    "ascend-a2-1x8": ascend_a2(1),
    "ascend-a2-2x8": ascend_a2(2),
    "ascend-a2-2x8-rail": ascend_a2(2, wiring="rail"),
    "dgx-h100-2x8": dgx_h100(2),
}
