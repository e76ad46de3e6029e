# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Collective communication course
#     language: python
#     name: collective-course
# ---

# %% [markdown]
# # 05 · Topology: the same algorithm on different wiring
#
# Notebook 04 costed algorithms with one α and one β, as if every pair of
# ranks were joined by the same wire. Real clusters are not like that. Inside
# an 8-NPU Ascend server every NPU has a direct HCCS link to every other;
# between servers, each NPU has one RoCE NIC. Inside an NVIDIA DGX the GPUs
# meet at NVSwitches; between DGXs, InfiniBand or RoCE. The fast links are
# inside a server, the slow ones between servers, and an algorithm that does
# not know which is which pays for it.
#
# **You will leave this notebook able to**
# - describe a cluster the way ASTRA-sim does (one building block per
#   dimension: Ring, FullyConnected, Switch) and simulate any schedule on it;
# - see a ring laid over the wiring, and which links it keeps busy;
# - explain why a hierarchical all-reduce (reduce-scatter inside each server,
#   all-reduce across servers, all-gather inside) beats a flat ring, and by
#   how much;
# - place ranks so that a ring crosses between servers as rarely as possible;
# - simulate 8 × N servers up to 4096 ranks and say where latency takes over;
# - read `npu-smi info -t topo` and `nvidia-smi topo -m`, and know what
#   `HCCL_ALGO` and `NCCL_ALGO` choose.
#
# Everything here runs in a simulator on your laptop: no process group is
# needed. The source of every hardware figure is listed in the repository's
# `REFERENCES.md`, section "Topology and hardware".

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from labsupport import costmodel, schedules, topology
from labsupport.viz.topology import draw_topology, link_heatmap

# %% [markdown]
# ## 1. A network in ASTRA-sim's words
#
# [ASTRA-sim](https://github.com/astra-sim/astra-sim), the distributed-training
# simulator from Georgia Tech, Meta and Intel, describes a network as a list of
# *dimensions*. Each dimension is one building block:
#
# | block | what it is | hops between two NPUs |
# |---|---|---|
# | `Ring` | each NPU linked to its two neighbours | the shorter way round (1 … n/2) |
# | `FullyConnected` | a direct link between every pair | 1 |
# | `Switch` | every NPU linked to one switch | 2 (up, then down) |
#
# with `npus_count`, a link `bandwidth` in GB/s and a `latency` in ns per hop.
# One unit to watch: **ASTRA-sim's GB is 2³⁰ bytes**, not 10⁹ as in
# nccl-tests (notebook 06). 200 Gb/s of RoCE is 25·10⁹ bytes/s, which is
# 23.28 "ASTRA GB/s".
#
# Its congestion-unaware backend costs a message of `bytes` as
#
# $$ t = \text{hops} \times \text{latency} + \frac{\text{bytes}}{\text{bandwidth}} $$
#
# `labsupport.topology` reads and writes the same YAML, and reproduces that
# formula exactly. Here is the tutorial's two-dimensional example,
# `Ring_Switch.yml`: rings of 4 NPUs, joined across by switches.

# %%
ring_switch = topology.from_astra_sim(
    {
        "topology": ["Ring", "Switch"],
        "npus_count": [4, 2],
        "bandwidth": [50.0, 10.0],
        "latency": [500.0, 2500.0],
    },
    name="Ring_Switch",
)
print(ring_switch.describe())
yml = Path(tempfile.mkdtemp()) / "network.yml"
topology.to_astra_sim(ring_switch, yml)  # and back, to a file ASTRA-sim reads
print(yml.read_text())

# %% [markdown]
# NPU `i` has one coordinate per dimension, dimension 0 varying fastest: NPU 6
# is the third NPU of the second ring. Check the formula by hand on three
# messages of 1 MiB:

# %%
MiB = 2**20
GIB = topology.GIB
for src, dst, hand in [
    (0, 1, 1 * 500e-9 + MiB / (50 * GIB)),  # ring neighbours: 1 hop
    (0, 2, 2 * 500e-9 + MiB / (50 * GIB)),  # opposite side of the ring: 2 hops
    (1, 5, 2 * 2500e-9 + MiB / (10 * GIB)),  # through the switch: 2 hops
]:
    sim = topology.message_time(ring_switch, src, dst, MiB)
    print(f"NPU {src} -> {dst}: simulator {sim * 1e6:8.3f} us   by hand {hand * 1e6:8.3f} us")

# %% [markdown]
# A message between NPUs that differ in two coordinates (NPU 3 → NPU 4)
# crosses dimension 0 first, then dimension 1, and pays both. (ASTRA-sim's
# own collectives never send such a message; they work one dimension at a
# time, which is exactly the idea of the hierarchical all-reduce below.)
#
# ## 2. Two real servers
#
# The presets hold only figures with a source (see each one's `sources`).
# An **Atlas 800T A2** server has 8 NPUs with HCCS between every pair and 8
# RoCE ports, one 200 Gb/s NIC per NPU; the per-link HCCS figure (56 GB/s)
# comes from a blog only, so treat it as *reported*. No source gives
# per-hop latencies, so the preset uses 0 ns and says so.

# %%
a2 = topology.presets["ascend-a2-2x8-rail"]  # NPU i's NIC reaches NPU i of other servers
print(a2.describe())
print("note:", a2.note)
for s in a2.sources:
    print("source:", s)

# %%
print(topology.presets["dgx-h100-2x8"].describe())
print(topology.presets["hgx-h100-validated"].describe())

# %% [markdown]
# Per NPU, the HCCS mesh gives 7 links of 56 GB/s; the way out of the server
# is one 25 GB/s NIC. Inside is more than an order of magnitude faster than
# across. Here is the two-server A2 network: each server a circle of NPUs
# (the HCCS mesh), and one switch per NPU index below them (NPU *i* of every
# server shares a switch, one NIC each).

# %% tags=["nbval-ignore-output"]
ax = draw_topology(a2)

# %% [markdown]
# ## 3. A ring laid over the wiring
#
# A ring all-reduce on 16 ranks, rank *r* on NPU *r*, visits the 8 NPUs of
# server 0, crosses to server 1, visits its 8 NPUs and crosses back: **two**
# hops leave a server. The launcher decides which rank lands where; a
# placement that deals ranks to servers in turn (rank 0 on server 0, rank 1
# on server 1, …) makes **every** hop cross.

# %% tags=["nbval-ignore-output"]
good = list(range(16))
bad = [8 * (i % 2) + i // 2 for i in range(16)]  # NPUs 0, 8, 1, 9, ...: every hop crosses
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
draw_topology(a2, ring=good, ax=axes[0])
draw_topology(a2, ring=bad, ax=axes[1])
axes[0].set_title("ring in NPU order: 2 hops cross")
axes[1].set_title("ranks dealt to servers in turn: 16 hops cross");

# %% [markdown]
# With one NIC per NPU the bad ring is not slower: in every step each hop
# has its own link, and a ring always waits for its slowest hop, which
# crosses servers in both cases. Many servers have fewer NICs than devices,
# though. Give each server **one** uplink (`uplink="shared"`: all traffic
# out of a server goes through its NPU 0's NIC) and let links carry one
# message at a time (`congestion=True`):

# %%
one_nic = topology.Topology(a2.dims, "A2, one NIC per server", uplink="shared")
ring = schedules.ring_all_reduce(16)


def in_order(order):
    """A ring all-reduce visiting the ranks in this order (ring position i is rank order[i])."""
    plain = schedules.ring_all_reduce(len(order))
    steps = tuple(st.mapped(np.array(order)) for st in plain.steps)
    return schedules.Schedule("ring", "all_reduce", len(order), len(order), steps)


nbytes = 256 * MiB
print(f"{'':28s} {'8 NICs':>10s} {'1 NIC, congestion':>18s}")
results = {}
for label, order in [("ring in NPU order", good), ("ranks dealt in turn", bad)]:
    per_npu = topology.simulate(in_order(order), a2, nbytes, congestion=True).time
    shared = topology.simulate(in_order(order), one_nic, nbytes, congestion=True)
    results[label] = shared
    print(f"{label:28s} {per_npu * 1e3:8.2f} ms {shared.time * 1e3:15.2f} ms")

# %% [markdown]
# Now 8 messages leave each server through the same NIC in every step of the
# bad ring, and it is several times slower. The simulator also says *where*
# the time goes: `link_busy` is how long each link carried bytes. As a heat
# map (rows: from, columns: to; NPUs 0–15, then the switches; one colour
# scale for both):

# %% tags=["nbval-ignore-output"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
top = max(r.link_busy.max() for r in results.values()) * 1e3  # one colour scale for both
link_heatmap(results["ring in NPU order"], ax=axes[0], vmax_ms=top)
link_heatmap(results["ranks dealt in turn"], ax=axes[1], vmax_ms=top)
axes[0].set_title("ring in NPU order")
axes[1].set_title("ranks dealt in turn");

# %% [markdown]
# On the left, two uplinks (NPU 0 ↔ its switch) carry the crossing; on the
# right the same uplinks carry eight times as much, and the HCCS links that
# lead to NPU 0 light up too.
#
# **Exercise 05.1.** A launcher has put rank `r` on node `node_of[r]`, at NPU
# index `local_of[r]` there, and the cluster is wired rail by rail, as the
# `ascend-a2-2x8-rail` preset drawn above: NPU *i*'s NIC reaches only NPU *i*
# of the other nodes. Return the order in which a ring should visit the ranks
# so that it runs as fast as a ring can on this wiring. The grader lays your
# ring on such a network and simulates it with congestion.

# %%
# Exercise 05.1: a ring order for rail-optimised wiring
def ring_order(node_of, local_of):
    # BEGIN SOLUTION
    nodes = max(node_of) + 1
    per_node = len(node_of) // nodes
    rank = {(node_of[r], local_of[r]): r for r in range(len(node_of))}
    # Walk rail 0 through every node, step to rail 1 inside the last node, walk it back, ...:
    # every hop between nodes stays on its rail, and with an even number of NPUs per node
    # the ring ends inside node 0, next to where it started.
    return [rank[(n if lane % 2 == 0 else nodes - 1 - n, lane)]
            for lane in range(per_node) for n in range(nodes)]
    # END SOLUTION


# %%
from labsupport.check.topology import check_ring_order

check_ring_order(ring_order)

# %% [markdown]
# In practice you rarely write the ring yourself: HCCL and NCCL build their
# own inside a communicator. What you control is the placement (torchrun
# gives consecutive ranks to one node: RANK = node_rank × nproc_per_node +
# local_rank; a hand-written rank table or hostfile may not) and which
# algorithm runs.
#
# ## 4. Flat ring against hierarchical all-reduce
#
# A flat ring moves 2(p−1)/p of the buffer through every rank's links, and
# each of its 2(p−1) steps waits for a hop that crosses servers. The
# **hierarchical** all-reduce uses each kind of link for what it is good at:
#
# 1. reduce-scatter on a ring inside each server: local rank *l* ends with
#    piece *l* (1/g of the buffer) summed over its server;
# 2. all-reduce of piece *l* on a ring across servers, among the ranks with
#    local rank *l* (g rings at once, one per NIC);
# 3. all-gather on a ring inside each server.
#
# Only 1/g of the buffer crosses servers per rank. This is how HCCL runs an
# all-reduce across A2 servers, and what ASTRA-sim's `localBWAware` option
# does on two dimensions. With g ranks per node, m nodes, α₁, β₁ inside and
# α₂, β₂ across:
#
# $$ T_{hier} = 2(g-1)\left(\alpha_1 + \tfrac{n}{g}\beta_1\right)
#             + 2(m-1)\left(\alpha_2 + \tfrac{n}{gm}\beta_2\right) $$
#
# `schedules.hierarchical_all_reduce(p, ranks_per_node)` builds it as a
# schedule like any other (it runs on real process groups with `execute`, and
# is tested against `dist.all_reduce`):

# %%
print(schedules.format_steps(schedules.hierarchical_all_reduce(4, 2, intra="ring")))
schedules.verify(schedules.hierarchical_all_reduce(32, 8, intra="ring"))  # an all-reduce

# %%
hier = schedules.hierarchical_all_reduce(16, 8, intra="ring")
print(f"{'A2, 2 servers x 8, 256 MiB':28s} {'time':>9s}   busy s per dimension (HCCS, RoCE)")
for sched in (ring, hier):
    r = topology.simulate(sched, a2, nbytes)
    busy = ", ".join(f"{b:.3f}" for b in r.busy_by_dim())
    print(f"{sched.name:28s} {r.time * 1e3:6.2f} ms   {busy}")

# %% [markdown]
# The flat ring pushes every step's crossing through two NICs (the hops
# 7 → 8 and 15 → 0), 2(p−1) times; the hierarchical schedule sends fewer
# bytes across (1/8 of the buffer per rank, on a ring of only 2 servers) and
# uses all 8 NICs at once. The RoCE busy time halves, the total time drops
# threefold.
#
# **Exercise 05.2.** Predict the speed-up T_flat / T_hier for 4 nodes of 8
# ranks, a 64 MiB buffer, α₁ = 2 µs and 50·10⁹ B/s inside a node, α₂ = 10 µs
# and 5·10⁹ B/s across (the network of `topology.two_level`: one link per
# pair inside a node, and one per pair of nodes for each local rank), for the
# hierarchical schedule above (rings inside the nodes). Work out what each step
# of the flat ring waits for on this wiring. The grader compares with the
# simulator, within 10 %.

# %%
NET = dict(nodes=4, per_node=8, nbytes=64 * MiB, intra=(2e-6, 50e9), inter=(10e-6, 5e9))


# %%
# Exercise 05.2: predict the hierarchical speed-up
def predicted_speedup():
    # BEGIN SOLUTION
    g, m, n = NET["per_node"], NET["nodes"], NET["nbytes"]
    (a1, bw1), (a2_, bw2) = NET["intra"], NET["inter"]
    b1, b2, p = 1 / bw1, 1 / bw2, g * m
    flat = 2 * (p - 1) * (a1 + a2_ + n / p * (b1 + b2))
    two = costmodel.hierarchical_all_reduce_time(
        n, p, a1, b1, ranks_per_node=g, inter_alpha=a2_, inter_beta=b2, intra="ring"
    )
    return flat / two
    # END SOLUTION


# %%
from labsupport.check.topology import check_hierarchical_speedup

check_hierarchical_speedup(predicted_speedup, **NET)

# %% [markdown]
# ## 5. Measured on two emulated nodes
#
# Time to check the simulator against something that really runs. Your
# laptop has no slow inter-node link, so `labsupport.netem` emulates one: 4
# real gloo ranks as two nodes of two, every message delayed as its link
# would delay it. Inside a node each pair of ranks has its own link; between
# nodes each rank has one NIC (the `two-nodes` preset, slowed down so that
# the emulated time dwarfs your CPU's own work). The same network as a
# topology, for the simulator:

# %%
import labsupport as lab
from labsupport import netem

EMULATED = netem.PRESETS["two-nodes"]
print(EMULATED)
emulated = topology.from_netem(EMULATED, 4)
print(emulated.describe())

# %% [markdown]
# On each rank: warm up, then several times start together (barrier), time
# one all-reduce, and keep the slowest rank's time — the timing code of
# notebook 06, the one to take to a cluster. Of the repetitions we keep the
# fastest: on a shared laptop it is the one least disturbed by other
# programs (on a quiet cluster, report the mean as nccl-tests does). The library's own all-reduce
# runs the algorithm netem is told to (as `HCCL_ALGO` / `NCCL_ALGO` tell the
# real libraries); the two ring orders run our own schedules with
# `schedules.execute` over the same emulated links.

# %%
NBYTES_EMULATED = 16 * MiB
ORDERS = {"ring 0,1,2,3 (2 hops cross)": [0, 1, 2, 3], "ring 0,2,1,3 (4 hops cross)": [0, 2, 1, 3]}


def measure(nbytes, orders, iters=5):
    """On every rank: {case: fastest over iters of the slowest rank's time (s)}."""
    import time

    import torch
    import torch.distributed as dist

    from labsupport.bench.device import synchronize

    x = torch.ones(nbytes // 4)  # on a cluster: on this rank's device

    def timed(fn):
        fn()  # warm-up
        samples = []
        for _ in range(iters):
            synchronize(x.device)
            dist.barrier()
            start = time.perf_counter()
            fn()
            synchronize(x.device)
            elapsed = torch.tensor([time.perf_counter() - start])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
            samples.append(float(elapsed))
        return min(samples)

    out = {}
    for algorithm in ("ring", "hierarchical"):
        netem.set_algorithm(algorithm)
        out[f"dist.all_reduce, {algorithm}"] = timed(lambda: dist.all_reduce(x))
    for name, order in orders.items():
        sched = in_order(order)
        out[name] = timed(lambda sched=sched: schedules.execute(sched, x))
    return out


with lab.Cluster(4, network=EMULATED, timeout=300) as cluster:
    measured = cluster.run(measure, NBYTES_EMULATED, ORDERS)[0]

# %% tags=["nbval-ignore-output"]
predicted_schedules = {
    "dist.all_reduce, ring": schedules.ring_all_reduce(4),
    "dist.all_reduce, hierarchical": schedules.hierarchical_all_reduce(4, 2, intra="ring"),
    **{name: in_order(order) for name, order in ORDERS.items()},
}
print(f"all-reduce of {NBYTES_EMULATED // MiB} MiB on 2 emulated nodes of 2 ranks")
print(f"{'':32s} {'measured':>10s} {'predicted':>10s} {'ratio':>6s}")
for name, sched in predicted_schedules.items():
    model = topology.simulate(sched, emulated, NBYTES_EMULATED, congestion=True).time
    print(f"{name:32s} {measured[name] * 1e3:7.1f} ms {model * 1e3:7.1f} ms {measured[name] / model:6.2f}")

# %% [markdown]
# Measured and predicted should agree within about 20 %: the simulator
# counts only the links, while the measurement also pays the CPU's own work
# (additions, waking up the ranks, more on a busy machine) and the real bytes
# crossing your machine's loopback underneath the emulated delay. That extra
# weighs most where the emulated links are fast: in the hierarchical row,
# whose intra-node steps move half the buffer each. The hierarchical
# all-reduce is
# the clear winner: each rank sends only its half of the buffer across, and
# both NICs of a node work at once.
#
# The two ring orders take the same time, measured and simulated: each rank
# has its own NIC here, so the extra crossings of the bad order use NICs that
# were idle anyway, and every step of both rings waits for one crossing hop.
# The bad order costs time when crossings share a link — a server with fewer
# NICs than devices, as in section 3's simulation. Check your cluster's
# wiring (section 7) before deciding which case you are in.
#
# ## 6. Scale: 8 × N servers, up to 4096 ranks
#
# Now the question every cluster owner asks: what happens at 512 servers?
# The simulator handles a 4096-rank ring in a fraction of a second (a ring's
# steps share one routing; see `benchmarks/simulate_scale.py`). Four
# algorithms, on A2 servers:
#
# - **flat ring**: 2(p−1) steps;
# - **hierarchical**: 2(g−1) + 2(m−1) steps;
# - **halving-doubling** (Rabenseifner; HCCL's `H-D_R` across servers):
#   2 lg p steps, bandwidth-optimal;
# - **binomial tree**: reduce to rank 0 then broadcast, 2 lg p steps, but the
#   whole buffer on every step. (NCCL's *double binary tree* pipelines chunks
#   through two trees, which keeps the logarithmic latency *and* full
#   bandwidth; this textbook tree does not.)
#
# The latencies are an assumption, since no source gives them for HCCS and
# RoCE: we borrow the round figures of ASTRA-sim's own example config
# (`Ring_Switch.yml`: 500 ns per hop on the fast dimension, 2500 ns on the
# switched one). Change them to your own measured α and re-run.

# %%
LATENCY_NS = (500.0, 2500.0)  # assumption: ASTRA-sim's example figures, not Ascend measurements
SERVERS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
SIZES = {"1 MiB": MiB, "256 MiB": 256 * MiB}


def tree_all_reduce(p):
    """Binomial reduce to rank 0, then binomial broadcast: the whole buffer each step."""
    return schedules.binomial_reduce(p).then(
        schedules.binomial_broadcast(p), "tree_all_reduce", "all_reduce"
    )


ALGORITHMS = {
    "flat ring": lambda n: schedules.ring_all_reduce(8 * n),
    "hierarchical": lambda n: schedules.hierarchical_all_reduce(8 * n, 8, intra="ring"),
    "halving-doubling": lambda n: schedules.rabenseifner_all_reduce(8 * n),
    "binomial tree": lambda n: tree_all_reduce(8 * n),
}
times = {(a, s): [] for a in ALGORITHMS for s in SIZES}
for n_servers in SERVERS:
    topo = topology.ascend_a2(n_servers, wiring="rail").with_latency(*LATENCY_NS)
    for algo, build in ALGORITHMS.items():
        sched = build(n_servers)
        for size, nb in SIZES.items():
            times[algo, size].append(topology.simulate(sched, topo, nb).time)

# %% tags=["nbval-ignore-output"]
ranks = [8 * n for n in SERVERS]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
for ax, size in zip(axes, SIZES, strict=True):
    for algo in ALGORITHMS:
        ax.loglog(ranks, np.array(times[algo, size]) * 1e3, "o-", ms=3, label=algo)
    ax.set_title(f"all-reduce of {size} on 8 x N A2 servers (simulated)")
    ax.set_xlabel("ranks")
    ax.set_ylabel("time (ms)")
    ax.grid(True, which="both", alpha=0.3)
axes[0].legend()
fig.tight_layout()

# %%
columns = [(a, s) for s in SIZES for a in ALGORITHMS]
print(f"{'ranks':>6s}" + "".join(f"{a[:12] + ', ' + s:>22s}" for a, s in columns))
for i, p in enumerate(ranks):
    print(f"{p:6d}" + "".join(f"{times[c][i] * 1e3:19.2f} ms" for c in columns))

# %% [markdown]
# Read the table and the two panels:
#
# - At 256 MiB the flat ring's bandwidth term hardly grows with p (each rank
#   moves 2(p−1)/p·n whatever p is), but every step is paid at the speed of a
#   crossing hop; its time still climbs at large p, which is the latency term
#   arriving. The hierarchical schedule sends only 1/8 of the buffer across
#   servers. Halving-doubling, which starts with its nearest partner (inside
#   the server) and sends ever smaller pieces ever farther, does as well at 16
#   ranks and better as p grows: 2 lg p steps against 2(7 + N − 1). The
#   binomial tree, moving the whole buffer 2 lg p times, is the slowest by far.
# - At 1 MiB the flat ring's 2(p−1) steps take over: its time grows linearly
#   with p. The hierarchical schedule's 2(7 + N − 1) steps grow linearly too,
#   eight times more slowly; halving-doubling and the tree (2 lg p steps
#   each) grow only logarithmically.
#
# How much is 2(p−1)α at 4096 ranks? Simulating with a zero-byte buffer
# leaves only the latency terms:

# %%
p = 4096
topo = topology.ascend_a2(512, wiring="rail").with_latency(*LATENCY_NS)
latency_only = topology.simulate(schedules.ring_all_reduce(p), topo, 0).time
crossing_hop = topology.route(topo, np.array([7]), np.array([8])).latency[0]
print(f"alpha of a crossing hop: {crossing_hop * 1e6:.2f} us (1 HCCS hop, then 2 switch hops)")
print(f"2(p-1)·alpha at p = {p}: {2 * (p - 1) * crossing_hop * 1e3:.1f} ms")
print(f"simulated with 0 bytes:  {latency_only * 1e3:.1f} ms")
print("\nshare of the flat ring's time spent on latency (simulated with and without bytes):")
print(f"{'ranks':>6s}" + "".join(f"{size:>10s}" for size in SIZES))
for n_servers, p_ in zip(SERVERS, ranks, strict=True):
    topo_n = topology.ascend_a2(n_servers, wiring="rail").with_latency(*LATENCY_NS)
    lat = topology.simulate(schedules.ring_all_reduce(p_), topo_n, 0).time
    i = SERVERS.index(n_servers)
    print(f"{p_:6d}" + "".join(f"{lat / times['flat ring', s][i]:10.0%}" for s in SIZES))

# %% [markdown]
# At 4096 ranks a flat ring spends tens of milliseconds on latency alone,
# whatever the message size; with these latencies it is the larger part of
# the time for 1 MiB from 16 ranks on, and for 256 MiB from a few thousand. That is why large clusters do not run one flat
# ring: NCCL switches to trees, HCCL to hierarchical and halving-doubling
# algorithms across servers.
#
# ## 7. On real hardware
#
# ### HCCL (Ascend)
# HCCL chooses the algorithm itself, per operation and size. Inside a server
# (level 0) the hardware decides among Mesh, Ring, Double-Ring and Star;
# this level is not configurable. Across
# servers (level 1) it picks among ring, H-D_R (recursive halving-doubling),
# NHR, NHR_V1, NB, AHC and pipeline (pairwise for all-to-all). On multi-server
# A2 systems an all-reduce runs as intra-server reduce-scatter, inter-server
# all-reduce, intra-server all-gather: the hierarchical schedule above. HCCL
# documents its own cost model (Ring 2(p−1)α + 2(p−1)/p·nβ + …; Mesh
# 2α + (2/p)·nβ + …, because an NPU drives its HCCS links at once).
#
# You can force the inter-server algorithm with `HCCL_ALGO` (this turns off
# HCCL's adaptive choice):
#
# ```bash
# export HCCL_ALGO="level0:NA;level1:H-D_R"          # every operation
# export HCCL_ALGO="allreduce=level0:NA;level1:ring/alltoall=level0:NA;level1:pairwise"
# ```
#
# `level0` only accepts `NA`. Left unset on 910, HCCL uses ring when the
# number of servers is not a power of two, H-D_R otherwise.
#
# ### NCCL (NVIDIA)
# `NCCL_ALGO` restricts the algorithms NCCL may choose from: `Ring`, `Tree`,
# `CollNetDirect`, `CollNetChain`, `NVLS`, `NVLSTree`, `PAT`; `NCCL_PROTO`
# picks `LL`, `LL128` or `Simple`. NCCL 2.4's double binary trees gave up to
# 180× lower latency than rings at 24k GPUs. To measure the network itself
# between two nodes, force `NCCL_ALGO=Ring` so the number does not depend on
# NCCL's choice.
#
# ### Reading the topology matrix
# Both vendors print a matrix: one row and column per device, one code per
# pair saying how they are connected. The legends (Huawei Ascend-DMI
# documentation; NVIDIA's, as quoted in nccl-tests issue 331):
#
# | code | `npu-smi info -t topo` | `nvidia-smi topo -m` |
# |---|---|---|
# | `X` | the device itself | the device itself |
# | `HCCS` / `NV#` | HCCS link | a bonded set of # NVLinks |
# | `PIX` | one PCIe switch | at most one PCIe bridge |
# | `PXB` | | several PCIe bridges |
# | `PHB` | through the CPU's host bridge | through a host bridge |
# | `NODE` | | between host bridges in one NUMA node |
# | `SYS` | across NUMA nodes | across NUMA nodes |
#
# The cell below prints **an illustration, not a capture**: the matrix a
# reader should expect for 8 NPUs in a full HCCS mesh, as described for an
# 8 × 910B host in the arthurchiao.art blog post cited in REFERENCES.md (real
# output also lists the NICs and CPU affinity). On an 8 × H100 SXM machine,
# `nvidia-smi topo -m` shows `NV18` for every GPU pair (NVIDIA/nccl issue 1264).
# On the older Atlas 800 with 910A, NPUs 0–3 and 4–7 form two HCCS groups
# joined over PCIe: pairs across the groups show a PCIe code, and a ring
# that crosses between them twice pays for it.

# %%
names = [f"NPU{i}" for i in range(8)]
print("ILLUSTRATION (not captured here): expected shape of `npu-smi info -t topo` on 8 x 910B")
print(" " * 6 + "".join(f"{n:>6s}" for n in names))
for i, n in enumerate(names):
    print(f"{n:6s}" + "".join(f"{'X' if i == j else 'HCCS':>6s}" for j in range(8)))

# %% [markdown]
# ## 8. Common mistakes
#
# These circulate in popular write-ups; each is corrected here in the course's
# own words.
#
# - **A bandwidth table typed in instead of measured.** A table of "intra-node
#   ring: x GB/s, inter-node RoCE: y GB/s" with no benchmark behind it tells
#   you nothing about your cluster. Measure with the benchmark of notebook 06
#   (busbw, the right factor, max over ranks), then simulate with *your*
#   numbers.
# - **Cross-node RoCE listed as faster than intra-node links.** One 200 Gb/s
#   RoCE NIC is 25·10⁹ B/s; an NPU's HCCS mesh links are each reported at
#   56 GB/s, and there are 7 of them. If a table ranks RoCE above the
#   intra-server links, it is wrong or measured something else (an
#   unsynchronised timer, algbw against busbw).
# - **"Ring inside, tree outside" — and the reverse, in the same text.**
#   Neither is a rule. What the libraries do is documented: HCCL uses mesh or
#   ring inside a server and ring, H-D_R, NHR or NB across, chosen by size and
#   server count; NCCL picks ring or tree (or NVLS, CollNet) per size. Section 6
#   shows why: the best choice changes with message size and scale.
# - **Topology-aware switches that do not exist.**
#   `torch.npu.set_config(topology_aware=True)`, a `torch_npu.npu.topology`
#   module, `dist.GroupMember.NON_INCLUSIVE_GROUP` and
#   `torch.distributed.dist_c10d` are not APIs of torch or torch_npu.
#   `NCCL_TOPOLOGY_FILE` is not an NCCL variable (the real one is
#   `NCCL_TOPO_FILE`) and HCCL ignores it. Topology awareness is inside HCCL
#   and NCCL; what you set are `HCCL_ALGO` / `NCCL_ALGO` and the placement.
#
# ## Recap
#
# - A network is a list of dimensions (Ring, FullyConnected, Switch), each
#   with a bandwidth (ASTRA-sim's GB = 2³⁰ B) and a per-hop latency; a message
#   costs hops × latency + bytes / bandwidth in each dimension it crosses.
# - A ring waits for its slowest hop. When links are shared, every hop that
#   crosses servers adds load to the same NIC: place ranks so the ring crosses
#   once per server.
# - The hierarchical all-reduce sends only 1/g of the buffer across servers;
#   its cost is 2(g−1)(α₁ + n/g·β₁) + 2(m−1)(α₂ + n/(gm)·β₂).
# - At thousands of ranks the flat ring's 2(p−1)α dominates small messages;
#   logarithmic algorithms (trees, halving-doubling) and hierarchy win there.
# - `HCCL_ALGO="level0:NA;level1:H-D_R"` and `NCCL_ALGO=Ring` force the
#   choice; `npu-smi info -t topo` and `nvidia-smi topo -m` show the wiring.
#
# ## Where to go next
#
# Notebook 06 measures bandwidth properly, so the numbers you feed this
# simulator are your own. To go further, export a topology with
# `topology.to_astra_sim(topo, "network.yml")` and run it in ASTRA-sim
# itself, with its system layer and workloads.
