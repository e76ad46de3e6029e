# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Collective communication course
#     language: python
#     name: collective-course
# ---

# %%

# %% [markdown] slideshow={"slide_type": "slide"}
# # 04 · Algorithms and cost models
#
# - the α-β(-γ) model: latency per message, time per byte, reduction per byte
# - ring, binomial tree, recursive doubling, Rabenseifner; NCCL's double binary tree
# - the crossover size, and which algorithm wins where
# - the model against real runs on an emulated network

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Notebook 03 counted bytes; this one adds the cost of a message.
# The goal is that learners can say, for their own cluster, "below this size
# latency dominates, above it bandwidth".

# %% slideshow={"slide_type": "skip"}
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import costmodel, netem, schedules
from labsupport.runtime import emulator
from labsupport.runtime.viz import explore
from labsupport.units import format_time

ALGOS = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "recursive_doubling": costmodel.recursive_doubling_all_reduce_time,
    "rabenseifner": costmodel.rabenseifner_all_reduce_time,
}
net = netem.PRESETS["slow-ethernet"]
alpha, beta = net.inter.alpha, net.inter.beta  # 1 ms, 50 MB/s


def time_all_reduce(sizes, iters=3):
    """On every rank: seconds per all_reduce at each size (the slowest rank's, median)."""
    from labsupport.runtime.bench.timing import time_iterations

    seconds = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4)
        seconds.append(time_iterations(lambda i, x=x: dist.all_reduce(x), iters).median)
    return seconds


# %% [markdown] slideshow={"slide_type": "slide"}
# ## A message of $n$ bytes costs $\alpha + n\beta$
#
# | all-reduce | steps (× α) | bytes per rank (× β) |
# |---|---|---|
# | ring | 2(p−1) | 2n(p−1)/p |
# | binomial tree | 2 lg p | 2n lg p |
# | recursive doubling | lg p | n lg p |
# | Rabenseifner | 2 lg p | 2n(p−1)/p |
#
# p not a power of two: recursive doubling and Rabenseifner fold the extra
# ranks in first, 2 more steps of the whole buffer (MPICH; HCCL's RHD).
# Thakur, Rabenseifner & Gropp (2005).

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Read the table as two columns: the α column counts steps, the β
# column counts bytes per rank. Ring and Rabenseifner reach the byte lower
# bound of notebook 03; tree and recursive doubling move the whole buffer at
# every step. No algorithm wins both columns. A reduction adds γ per byte it
# adds: (p−1)/p·n for ring and Rabenseifner, lg p·n for the tree and
# recursive doubling. Learners often think "tree is faster than ring" in
# general: it depends on n and p, the next pictures show.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Two regimes: latency-bound, bandwidth-bound

# %% slideshow={"slide_type": "-"}
ax = explore.cost_curves(ALGOS, alpha=alpha, beta=beta, p=4, size=1 << 20)

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Left: flat curves, time = steps × α, recursive doubling (fewest
# steps) wins. Right: slope 1, time = bytes × β, ring and Rabenseifner win.
# The bend is where the two terms are equal; for the ring, n = p·α/β. The
# dashed line marks 1 MiB and names its winner. The network numbers are those
# of the emulated `slow-ethernet` preset used in the live demo. In the
# notebook the same picture has sliders for α, bandwidth, p and size.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which algorithm wins where

# %% slideshow={"slide_type": "-"}
ax = explore.winner_map(ALGOS, alpha=alpha, beta=beta, mark=(6, 64 << 20))

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** For powers of two, Rabenseifner moves the ring's bytes in fewer
# steps: in this model the ring wins nowhere on those rows. On the rows 6, 12
# and 24 the fold's two whole-buffer steps cost more than the ring's latency
# for large messages, and the ring wins there (circled: p = 6, 64 MiB).
# NCCL chooses per call with a model like this one: each algorithm and
# protocol gets a latency and a bandwidth, the predicted time is
# latency + n/bandwidth, and the smallest wins (NVIDIA/nccl
# `src/graph/tuning.cc`, `ncclTopoTuneModel` and `ncclTopoGetAlgoTime`;
# `src/enqueue.cc`, `topoGetAlgoInfo`; `getAlgoInfo` up to 2.19). The
# ring's latency grows with its 2(p−1) steps and the tree's with lg of the
# node count, while the tree's bandwidth is set lower: at many nodes trees
# take small and medium messages and rings the large ones. HCCL offers H-D_R
# (recursive halving-doubling) between servers. Exercise 04.2: the crossover
# of recursive doubling and Rabenseifner.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The crossover moves with α/β

# %% slideshow={"slide_type": "-"}
pair = {name: ALGOS[name] for name in ("ring", "recursive_doubling")}
for label, a, b in [("as is", alpha, beta), ("latency ×10", 10 * alpha, beta),
                    ("bandwidth ÷10", alpha, 10 * beta)]:  # fmt: skip
    n = explore.crossover_size(pair["recursive_doubling"], pair["ring"], 4, a, b)
    best, t = explore.winner(pair, 1 << 20, 4, a, b)
    print(f"{label:>13}: cross at {n / 1e3:,.0f} kB; at 1 MiB {best} wins, {format_time(t)}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Ask first: "latency ×10, bandwidth ÷10: where does the crossover
# go, and who wins at 1 MiB?" Every crossover is a difference of latency terms
# over a difference of per-byte terms, so it is proportional to α/β: latency
# ×10 moves it right 10×, bandwidth ÷10 (β ×10) moves it left 10×. With
# latency ×10 the winner at 1 MiB flips from the ring to recursive doubling.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: the model on an emulated network
#
# Emulated: the clock. Real: the data, the results, the CPU work.
# **Predict** ring vs recursive doubling at 4 KiB and 1 MiB.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
sizes, measured = [4 << 10, 1 << 20], {}
with lab.Cluster(4, network="slow-ethernet") as cluster:
    for name in pair:
        cluster.run(emulator.set_algorithm, name)
        measured[name] = (sizes, cluster.run(time_all_reduce, sizes)[0])
explore.measured_vs_model(measured, lambda name, n: ALGOS[name](n, 4, alpha, beta))

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** The ranks run real gloo all-reduces; `time.perf_counter()` on a
# rank reads the emulated clock, on which each message costs latency +
# bytes/bandwidth and each step's CPU work its measured CPU time. So the
# ratios sit at or just above 1, on a quiet laptop or a busy one, and the
# cell takes less time than it reports. Not modelled: a γ you choose,
# congestion beyond a link's queue, protocols, in-network reduction.
# The notebook measures all four algorithms at four sizes and a two-level
# hierarchical all-reduce.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Two levels: which partner first?

# %% slideshow={"slide_type": "-"}
two_nodes = netem.PRESETS["two-nodes"]  # 2 nodes × 2 ranks: fast mesh inside, slow NICs
for order in schedules.ORDERS:
    sched = schedules.rabenseifner_all_reduce(4, order=order)
    took = netem.simulate_on_network(sched, 4 << 20, two_nodes).max()
    print(f"Rabenseifner, {order}: {format_time(took)}")
hierarchical = netem.model_time("all_reduce", "hierarchical", 4 << 20, 4, two_nodes)
print(f"hierarchical (in node, across, in node): {format_time(hierarchical)}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Model times at 4 MiB. Nearest first (rank r meets r XOR 1, on its
# own node) sends the big half over the fast link and only a quarter across:
# it costs what the hierarchical algorithm costs. Farthest first sends the big
# half over the slow NICs. MPICH's all-reduce, ASTRA-sim's HalvingDoubling and
# HCCL's RHD on hierarchical networks start near; MPICH's reduce-scatter starts
# far so that rank r ends with block r. The notebook runs both on the emulated
# network.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## NCCL's tree is a double binary tree
#
# - one binary tree: leaves only send, interior ranks receive two and send one
# - two trees: every rank a leaf in one, interior in the other; half the data each
# - the reason is **bandwidth balance**: full bandwidth, latency ∝ lg p
# - ASTRA-sim's `doubleBinaryTree`: whole chunks alternate between two trees

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Sanders, Speck & Träff (2009); NVIDIA's blog on NCCL 2.4 (2019).
# NCCL splits every buffer between both trees at once, pipelined in blocks;
# it builds the trees over nodes (`ncclGetDtree(nNodes, …)`), a chain inside each.
# ASTRA-sim's DoubleBinaryTreeTopology hands out one tree, then the other, to
# successive chunks of a collective: a different algorithm under the same
# name. `emulator.set_algorithm("double_binary_tree")` runs NCCL's trees.
#
# **Now:** notebook 04, 40 min (fit α and β to your own machine at the end:
# ranks ≤ cores, read the residual; 1/β there is gloo's TCP over loopback).
# **Next:** 05 · topology.
