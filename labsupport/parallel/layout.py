"""Layouts at scale: the bytes and time of each collective class per step, for DP × TP × PP × EP.

Start at :func:`step_time` (one layout of a workload on a cluster, every class timed with
the topology simulator), then :func:`best` (every layout, ranked). Rank r's coordinates
are Megatron's order: TP varies fastest, then EP (inside DP), then DP, then PP, so a TP
group of 8 fills one server and a PP group strides across servers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from labsupport.schedules import (
    direct_all_gather,
    direct_all_reduce,
    hierarchical_all_reduce,
    ring_all_reduce,
)
from labsupport.topology import Topology, message_time, simulate_on_topology


@dataclass(frozen=True)
class Workload:
    """A transformer: ``layers`` × (attention 4h² + ``experts`` MLPs of 8h²), and its batch.

    ``global_batch`` sequences of ``seq`` tokens per step, in micro-batches of
    ``micro``; ``value_bytes`` per activation and gradient value (2: bf16).
    """

    name: str
    layers: int
    hidden: int
    seq: int
    global_batch: int
    micro: int = 1
    experts: int = 1  # > 1: every MLP is a top-1 mixture of this many experts
    value_bytes: int = 2
    source: str = ""

    @property
    def params(self) -> float:
        """Ψ, embeddings left out: layers · (4h² + experts · 8h²)."""
        return self.layers * (4 + 8 * self.experts) * self.hidden**2

    @property
    def activation_bytes(self) -> float:
        """One micro-batch's activations between two layers: micro · seq · hidden values."""
        return self.micro * self.seq * self.hidden * self.value_bytes


#: GPT-3 175B: 96 layers, d_model 12288, n_ctx 2048, batch 3.2M tokens = 1536 sequences.
GPT3_175B = Workload("GPT-3 175B", 96, 12288, 2048, 1536, source="Brown et al. (2020), Table 2.1")


@dataclass(frozen=True)
class Layout:
    """How many ways each dimension is split; ``ep`` divides ``dp`` (experts shard DP ranks)."""

    dp: int
    tp: int
    pp: int
    ep: int = 1

    @property
    def npus(self) -> int:
        """NPUs the layout takes."""
        return self.dp * self.tp * self.pp

    def __str__(self) -> str:
        ep = f" EP{self.ep}" if self.ep > 1 else ""
        return f"DP{self.dp} TP{self.tp} PP{self.pp}{ep}"


def collectives(w: Workload, lay: Layout) -> list[tuple[str, str, int, int, int, float]]:
    """Each class's (name, kind, group size, group stride, calls per step, bytes per call)."""
    m = w.global_batch // (lay.dp * w.micro)  # micro-batches per step, per pipeline
    act, h2 = w.activation_bytes, w.hidden**2 * w.value_bytes
    dense = w.layers * (4 + 8 * (w.experts == 1)) * h2 / (lay.tp * lay.pp)
    out = [  # (Megatron: 2 all-reduces forward, 2 backward per layer; 2 sends per micro-batch)
        ("TP all-reduce", "all_reduce", lay.tp, 1, 4 * w.layers // lay.pp * m, act),
        ("PP send/recv", "send", lay.pp, lay.tp * lay.dp, 2 * m, act),
        ("DP all-reduce", "all_reduce", lay.dp, lay.tp, 1, dense),
    ]
    if w.experts > 1:  # dispatch and combine, forward and backward; expert gradients over DP/EP
        out.append(("EP all-to-all", "all_to_all", lay.ep, lay.tp, 4 * w.layers // lay.pp * m, act))
        experts = w.layers * 8 * w.experts * h2 / (lay.tp * lay.pp * lay.ep)
        out.append(("DP all-reduce (experts)", "all_reduce", lay.dp // lay.ep, lay.tp * lay.ep,
                    1, experts))  # fmt: skip
    return [c for c in out if c[2] > 1]


def placement(size: int, stride: int, server: int) -> tuple[int, int]:
    """(members per server, servers) of a group of ``size`` ranks ``stride`` apart."""
    inside = max(1, min(size, server // stride)) if stride < server else 1
    return inside, size // inside


@lru_cache(maxsize=4096)
def collective_time(topo: Topology, kind: str, inside: int, across: int, nbytes: float) -> float:
    """One call's time, simulated on the group's part of ``topo`` (no congestion, no overlap)."""
    # The group's own network: ``inside`` NPUs of a server, ``across`` servers. Every
    # preset gives each NPU its own links and NIC, so the groups of one class run side by
    # side without sharing a link: one group's time is the class's time.
    dims = (replace(topo.dims[0], npus=inside), replace(topo.dims[1], npus=across))
    group = Topology(dims, topo.name, uplink=topo.uplink if across > 1 else "rail")
    size = inside * across
    if kind == "send":  # to the next stage: across servers when the group spans them
        return message_time(group, 0, inside if across > 1 else 1, nbytes)
    if kind == "all_to_all":  # every rank sends 1/size of its tokens to every other
        return simulate_on_topology(direct_all_gather(size), group, nbytes, congestion=True).time
    if across == 1:  # HCCL's Mesh inside a server, NCCL over NVSwitch
        sched = direct_all_reduce(size)
    elif inside == 1:
        sched = ring_all_reduce(size)
    else:  # HCCL's and ASTRA-sim's two levels
        sched = hierarchical_all_reduce(size, inside)
    # congestion=True: a rank's messages share its links (its one port into an NVSwitch)
    return simulate_on_topology(sched, group, nbytes, congestion=True).time


@dataclass(frozen=True)
class Cluster:
    """Servers of ``server`` NPUs: ``network(servers)`` gives the topology; ``flops`` per NPU."""

    name: str
    network: object  # a function: servers -> Topology (topology.ascend_a2, topology.dgx_h100)
    server: int = 8
    flops: float = 400e12  # achieved FLOP/s per NPU: an assumption, the same on both
    memory: float = 64e9  # bytes per NPU for model states: an assumption, the same on both


def step_time(w: Workload, lay: Layout, cluster: Cluster) -> list[dict]:
    """One row per collective class, then the bubble: bytes and seconds per step, per NPU."""
    topo = cluster.network(max(1, lay.npus // cluster.server))
    rows = []
    for name, kind, size, stride, calls, nbytes in collectives(w, lay):
        inside, across = placement(size, stride, cluster.server)
        where = "inside" if across == 1 else "across" if inside == 1 else "both"
        t = collective_time(topo, kind, inside, across, float(nbytes))
        rows.append({"class": name, "group": size, "where": where, "calls": calls,
                     "bytes": calls * nbytes, "time": calls * t})  # fmt: skip
    # Compute: 6 FLOPs per parameter per token (forward 2, backward 4), on 1/(tp·pp) of
    # the layers' weights; the bubble idles (pp − 1) micro-batch slots (pipeline.bubble).
    active = w.layers * 12 * w.hidden**2 / (lay.tp * lay.pp)
    per_micro = 6 * active * w.micro * w.seq / cluster.flops
    rows.append({"class": "pipeline bubble", "group": lay.pp, "where": "-", "calls": 0,
                 "bytes": 0, "time": (lay.pp - 1) * per_micro})  # fmt: skip
    return rows


def model_states(w: Workload, lay: Layout) -> float:
    """Bytes of model states per NPU, mixed-precision Adam: 16Ψ (ZeRO's 2 + 2 + 12) split."""
    dense = w.layers * (4 + 8 * (w.experts == 1)) * w.hidden**2
    return 16 * (dense + (w.params - dense) / lay.ep) / (lay.tp * lay.pp)


def fits(w: Workload, lay: Layout, memory: float = float("inf")) -> bool:
    """Whether the layout divides the workload (layers, batch, experts) and fits ``memory``."""
    return (
        model_states(w, lay) <= memory
        and w.layers % lay.pp == 0
        and w.global_batch % (lay.dp * w.micro) == 0
        and lay.dp % lay.ep == 0
        and w.experts % lay.ep == 0
    )


def candidates(
    w: Workload, npus: int, memory: float = float("inf"), most: int = 64
) -> list[Layout]:
    """Every layout of ``npus`` NPUs in powers of two (TP, PP, EP up to ``most``) that fits."""
    twos = [2**i for i in range(most.bit_length())]
    out = []
    for tp in twos:
        for pp in twos:
            for ep in twos if w.experts > 1 else [1]:
                if npus % (tp * pp) == 0 and fits(
                    w, lay := Layout(npus // (tp * pp), tp, pp, ep), memory
                ):
                    out.append(lay)
    return out


def best(w: Workload, npus: int, cluster: Cluster) -> list[tuple[float, Layout]]:
    """Every candidate with its communication + bubble time per step, fastest first."""
    scored = [(sum(r["time"] for r in step_time(w, lay, cluster)), lay)
              for lay in candidates(w, npus, cluster.memory)]  # fmt: skip
    return sorted(scored, key=lambda pair: pair[0])
