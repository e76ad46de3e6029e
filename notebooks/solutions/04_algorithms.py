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
# # 04 · Algorithms and cost models
#
# Notebook 03 derived one all-reduce, the ring. Libraries ship several: NCCL
# has rings and trees, HCCL rings, recursive halving-doubling and more, MPI a
# dozen. Each wins somewhere. This notebook gives you the tool to say where,
# before you run anything: the **α-β(-γ) cost model**. Then it checks the model
# against real runs of real code on a network whose latency and bandwidth you
# choose.
#
# **You will leave this notebook able to**
# - write the α-β(-γ) cost of ring, binomial tree, recursive doubling,
#   recursive halving-doubling (Rabenseifner) and the two-level hierarchical
#   all-reduce, and say where each term comes from;
# - read whether a message is latency-bound or bandwidth-bound;
# - find the crossover size between two algorithms, in closed form and from the
#   curves;
# - predict what a slower or a longer network does to each algorithm, and check
#   it on an emulated network;
# - fit α and β to your own machine, and say when the fit means nothing.
#
# The exercises are **Exercise 04.1** (recursive doubling on point-to-point) and
# **Exercise 04.2** (a crossover size). Sources are in
# [REFERENCES.md](../../REFERENCES.md#cost-models-and-algorithms).

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import bench, costmodel, netem
from labsupport.check.algorithms import (
    check_crossover,
    check_recursive_doubling,
    crossover_reference,
)
from labsupport.viz.algorithms import plot_costs, plot_winner_map
from labsupport.viz.bandwidth import plot_bandwidth

# %load_ext labsupport

# %% [markdown]
# ## 1. The model
#
# Sending a message of `n` bytes costs `α + n·β`: a fixed **latency** α (software
# overhead, the first byte's trip) and a time per byte β (1/β is the
# bandwidth). A reduction adds `n·γ` for the arithmetic. An algorithm is a
# sequence of steps; in each step every rank sends and receives at most one
# message at once (one port, full duplex), so a step costs as much as its
# largest message. Adding up the steps gives the classic table of Thakur,
# Rabenseifner and Gropp (2005), for `p` ranks (a power of two) and an
# `n`-byte buffer, lg = log₂:
#
# | all-reduce algorithm | steps | cost |
# |---|---|---|
# | ring (reduce-scatter + all-gather) | 2(p−1) | 2(p−1)α + 2n(p−1)/p·β + n(p−1)/p·γ |
# | binomial tree (reduce, then broadcast) | 2 lg p | 2 lg p·(α + nβ) + lg p·nγ |
# | recursive doubling | lg p | lg p·(α + nβ + nγ) |
# | Rabenseifner (halving RS + doubling AG) | 2 lg p | 2 lg p·α + 2n(p−1)/p·β + n(p−1)/p·γ |
#
# Read it as two columns. The **α column** counts steps: the ring pays for
# `2(p−1)` of them, recursive doubling for only `lg p`. The **β column** counts
# the bytes one rank must move: the ring and Rabenseifner reach the lower bound
# `2n(p−1)/p` (notebook 03 proved it), the tree and recursive doubling move the
# whole buffer at every step. No algorithm wins both columns, so which one is
# fastest depends on `n`.
#
# `labsupport.costmodel` has each row as a function `f(n, p, α, β, γ)`. Take a
# slow network, α = 1 ms and 50 MB/s, the numbers of the emulated network used
# below, and 4 ranks:

# %%
ALGOS = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "recursive_doubling": costmodel.recursive_doubling_all_reduce_time,
    "rabenseifner": costmodel.rabenseifner_all_reduce_time,
}
net = netem.PRESETS["slow-ethernet"]
alpha, beta = net.inter.alpha, net.inter.beta
print(f"network: {net.inter}  ->  α = {alpha * 1e3:g} ms, β = {beta * 1e9:g} ns/byte")

sizes = np.logspace(10, 26, 33, base=2)  # 1 KiB .. 64 MiB
p = 4
model = {name: [f(n, p, alpha, beta) for n in sizes] for name, f in ALGOS.items()}
ax = plot_costs(sizes, model, title=f"all-reduce on {p} ranks, α = 1 ms, 50 MB/s (model)")

# %% [markdown]
# Two regimes, with a bend between them. On the left every curve is flat:
# **latency-bound**, the time is (number of steps)·α, and recursive doubling,
# with the fewest steps, wins. On the right every curve rises with slope 1:
# **bandwidth-bound**, the time is (bytes moved)·β, and the ring and
# Rabenseifner, which move the fewest bytes, win. The tree is never best here:
# it pays twice the steps of recursive doubling and moves the whole buffer.
#
# Where does a message stop being latency-bound? Where its two terms are
# equal. For the ring, `2(p−1)α = 2n(p−1)/p·β` gives `n = p·α/β`:

# %%
for name, f in ALGOS.items():
    latency_part = f(0, p, alpha, 0)
    bytes_part_per_byte = f(1, p, 0, beta)
    print(f"{name:>20}: latency term = bandwidth term at n = "
          f"{latency_part / bytes_part_per_byte / 1e3:8.1f} kB")

# %% [markdown]
# ### Which algorithm wins where
#
# The same model over a grid of world sizes and message sizes: each cell is
# coloured by the fastest algorithm. More ranks make the ring's `2(p−1)` steps
# expensive, so the region where a logarithmic algorithm wins grows with `p`.

# %%
ranks = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
grid_sizes = np.logspace(3, 30, 28, base=2)  # 8 B .. 1 GiB
grid = {name: np.array([[f(n, q, alpha, beta) for n in grid_sizes] for q in ranks])
        for name, f in ALGOS.items()}
ax = plot_winner_map(ranks, grid_sizes, grid, title="fastest all-reduce (α = 1 ms, 50 MB/s)")

# %% [markdown]
# Rabenseifner takes the large messages from the ring almost everywhere: it
# moves the same bytes in `2 lg p` steps instead of `2(p−1)`. Real libraries
# still use rings because the model's assumptions break in their favour: a
# ring only ever talks to two neighbours (easy to map onto a physical ring or a
# topology with few links), and pipelined rings keep every link busy all the
# time. Notebook 05 adds the wiring to the model.
#
# ## 2. Crossover sizes
#
# Two algorithms cross where their costs are equal. Each cost is `a + b·n`, so
# the crossover is one division. Recursive doubling against Rabenseifner
# (γ = 0):
#
# `lg p·α + lg p·nβ = 2 lg p·α + 2n(p−1)/p·β`  ⟹
# `n* = lg p·α / ((lg p − 2(p−1)/p)·β)`
#
# Below `n*` recursive doubling is faster (fewer steps), above it Rabenseifner
# (fewer bytes). For `p = 2` the denominator is 0: the two move the same bytes,
# and Rabenseifner's extra steps make it always slower.
#
# Exercise 04.2 asks for this as a function; the cell after it reads the same
# crossover off the curves, to check the algebra.

# %%
# Exercise 04.2: the size where Rabenseifner overtakes recursive doubling
def crossover(p, alpha, beta):
    """Bytes above which Rabenseifner all-reduce is faster than recursive doubling (γ = 0)."""
    # BEGIN SOLUTION
    lg = math.log2(p)
    denominator = (lg - 2 * (p - 1) / p) * beta
    return lg * alpha / denominator if denominator > 0 else math.inf
    # END SOLUTION


# %%
check_crossover(crossover)

# %%
for q in (4, 8, 64):
    fine = np.logspace(10, 24, 4000, base=2)
    rd = costmodel.recursive_doubling_all_reduce_time(fine, q, alpha, beta)
    rab = costmodel.rabenseifner_all_reduce_time(fine, q, alpha, beta)
    print(f"p = {q:2d}: closed form {crossover_reference(q, alpha, beta) / 1e3:7.1f} kB; "
          f"on the curves Rabenseifner first wins at {fine[np.argmax(rab < rd)] / 1e3:7.1f} kB")

# %% [markdown]
# ## 3. The model against real runs, on an emulated network
#
# On a laptop every "link" between ranks is the same memory bus, and 4 ranks
# share 2 cores: real timings there say more about the OS scheduler than about
# algorithms (notebook 06 measured that). To *see* the model we need a network
# whose α and β we choose. `labsupport.netem` emulates one, under real code:
# your `send`/`recv`, `dist.all_reduce`, DDP.
#
# **The link model.** A message of `b` bytes on a link takes
# `latency + b / bandwidth`; a link carries one message at a time in each
# direction (messages queue); the receiver has the data only when it has fully
# arrived. Within a node every pair of ranks has its own link (a full mesh, as
# HCCS in an 8-NPU Ascend server or NVSwitch); between nodes each rank has one
# NIC that all its inter-node messages share. The `slow-ethernet` preset puts
# every rank on a node of its own: one NIC per rank, which is exactly the
# one-port model of the table above.
#
# Underneath, the data really moves over gloo; each message carries the time
# it would arrive, and the receiver *sleeps* until then (so 4 ranks on 2 cores
# stay faithful). The built-in collectives run a real algorithm over these
# emulated links, chosen with `netem.set_algorithm(name)` on the ranks, or at
# start-up with `Network(algorithm=...)` or the `LAB_ALGO` environment variable
# (the way `NCCL_ALGO` and `HCCL_ALGO` choose). What it does not model: the CPU
# time of the reductions is your machine's, not a γ you choose, and loopback
# and Python add a little to every message (more on a busy machine).

# %% tags=["nbval-ignore-output"]
cluster = lab.Cluster(4, network="slow-ethernet")
cluster.network

# %% [markdown]
# The timing function is the one notebook 06 built, and what you would run on a
# real cluster: device tensors, warm-up, synchronize, barrier, and the
# *slowest* rank's time. The median over a few iterations keeps one slow
# iteration of a busy laptop out.

# %%
def time_all_reduce(sizes, iters=3):
    """On every rank: seconds per all_reduce at each size (slowest rank, median of iters)."""
    import statistics
    import time

    from labsupport.launch import rank_device

    device = rank_device()
    seconds = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, device=device)
        dist.all_reduce(x)  # warm-up
        samples = []
        for _ in range(iters):
            bench.synchronize(device)
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            bench.synchronize(device)
            elapsed = torch.tensor([time.perf_counter() - start], device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
            samples.append(elapsed.item())
        seconds.append(statistics.median(samples))
    return seconds


def measure(cluster, algorithms, sizes, iters=3):
    """{algorithm: (sizes, seconds)} measured on the cluster's ranks."""
    out = {}
    for name in algorithms:
        cluster.run(netem.set_algorithm, name)
        out[name] = (sizes, cluster.run(time_all_reduce, sizes, iters)[0])
    return out


# %% [markdown]
# Four algorithms, four sizes from 4 KiB to 2 MiB (about 5 s in all). Lines are
# the model of section 1, dots what the ranks measured:

# %% tags=["nbval-ignore-output"]
MEASURED_SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20]
measured = measure(cluster, ALGOS, MEASURED_SIZES, iters=5)
plot_sizes = np.logspace(11, 22, 23, base=2)
ax = plot_costs(
    plot_sizes, {n: [f(s, 4, alpha, beta) for s in plot_sizes] for n, f in ALGOS.items()},
    measured, title="all-reduce on 4 ranks over slow-ethernet: model (lines), measured (dots)",
)

# %% tags=["nbval-ignore-output"]
print(f"{'algorithm':>20}" + "".join(f"{s >> 10:>9} KiB" for s in MEASURED_SIZES))
for name, (xs, ts) in measured.items():
    ratios = [t / ALGOS[name](s, 4, alpha, beta) for s, t in zip(xs, ts)]
    print(f"{name:>20}" + "".join(f"{r:>13.2f}" for r in ratios))
print("(measured / model)")

# %% [markdown]
# The dots sit on their lines where the emulated wire time dominates: measured
# over modelled is close to 1 at the largest size. At small sizes the real cost
# of running four Python processes on two cores adds to the 1 ms steps (tens of
# µs per message on an idle machine, milliseconds when other programs compete
# for the cores), so the dots there sit above the lines: that is the
# emulation's floor, not the model's. If the ratios above are far from 1 at
# 2 MiB too, the machine was busy: close other programs and run the cell again.
#
# ## 4. Predict, then change the network
#
# Before you run the next cell, predict. Take the ring and recursive doubling
# at 4 KiB, 64 KiB and 1 MiB.
#
# 1. Multiply the **latency** by 10 (1 ms → 10 ms). Which curve moves up more
#    at 4 KiB? Does anything change at 1 MiB?
# 2. Divide the **bandwidth** by 10 (50 → 5 MB/s). Which sizes move? Does the
#    winner at 1 MiB change? Where does the crossover go?
#
# (The model's answer: latency multiplies the flat left part of each curve, by
# its number of steps, so the ring, with three times as many steps at p = 4,
# moves up the most; bandwidth multiplies the rising right part, so at 1 MiB
# recursive doubling, which moves more bytes, falls further behind. The
# crossover `n*` ∝ α/β moves right 10× in both cases.)

# %% tags=["nbval-ignore-output"]
CHANGED_SIZES = [4 << 10, 64 << 10, 1 << 20]
changes = {"latency ×10": net.scaled(latency=10), "bandwidth ÷10": net.scaled(bandwidth=0.1)}
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
for ax, (label, changed) in zip(axes, changes.items()):
    cluster.run(netem.set_network, changed)
    a, b = changed.inter.alpha, changed.inter.beta
    pair = {n: ALGOS[n] for n in ("ring", "recursive_doubling")}
    xs = plot_sizes[:-3]
    ax.loglog(xs, [ALGOS["ring"](s, 4, alpha, beta) * 1e3 for s in xs], ":", color="gray",
              label="ring before")
    plot_costs(xs, {n: [f(s, 4, a, b) for s in xs] for n, f in pair.items()},
               measure(cluster, pair, CHANGED_SIZES, iters=2), title=f"{label}: {changed.inter}", ax=ax)
_ = cluster.run(netem.set_network, net)
fig.tight_layout()

# %% [markdown]
# ## 5. Two levels: the hierarchical all-reduce
#
# Real clusters have two kinds of links: fast ones inside a server (HCCS,
# NVLink) and slower NICs between servers. A flat ring over 2 servers crosses
# the slow NICs at every step. The **hierarchical** all-reduce uses each kind
# for what it is good at, in three phases (what HCCL runs on multi-server
# Ascend systems, and what ASTRA-sim calls `localBWAware`):
#
# 1. a reduce-scatter inside each node: with `k` ranks per node, local rank `i`
#    ends with chunk `i` summed over its node;
# 2. an all-reduce across nodes, chunk by chunk: the `m` ranks with the same
#    local index (one per node) all-reduce their chunk, so only `n/k` bytes
#    cross each NIC;
# 3. an all-gather inside each node.
#
# Its cost, with α, β inside a node and α′, β′ between nodes:
# `2(k−1)(α + n/k·β) + 2(m−1)α′ + 2(n/k)(m−1)/m·β′` (γ left out). On the
# `two-nodes` preset (nodes of 2 ranks, a fast mesh inside, slow NICs between),
# the three algorithms, modelled by simulating their schedules on those links
# (`netem.model_time`) and measured:

# %% tags=["nbval-ignore-output"]
two_nodes = netem.PRESETS["two-nodes"]
print(two_nodes)
cluster.run(netem.set_network, two_nodes)
HIER = ("ring", "rabenseifner", "hierarchical")
hier_sizes = np.logspace(12, 22, 21, base=2)
hier_model = {n: [netem.model_time("all_reduce", n, int(s), 4, two_nodes) for s in hier_sizes]
              for n in HIER}
hier_measured = measure(cluster, HIER, [64 << 10, 1 << 20, 4 << 20], iters=2)
ax = plot_costs(hier_sizes, hier_model, hier_measured, title="all-reduce on 2 nodes × 2 ranks")
_ = cluster.run(netem.set_network, net)

# %% [markdown]
# The flat ring is the slowest: its ring of 4 ranks crosses the NICs on two of
# its links, and every step waits for the slowest link. The hierarchical
# version sends only half the buffer across the NICs, and the intra-node
# phases run on the fast mesh. The closed form above agrees with the
# simulation at 4 MiB:

# %%
n = 4 << 20
closed = costmodel.hierarchical_all_reduce_time(
    n, 4, two_nodes.intra.alpha, two_nodes.intra.beta, ranks_per_node=2,
    inter_alpha=two_nodes.inter.alpha, inter_beta=two_nodes.inter.beta,
)  # fmt: skip
print(f"closed form {closed * 1e3:.2f} ms, simulated schedule "
      f"{netem.model_time('all_reduce', 'hierarchical', n, 4, two_nodes) * 1e3:.2f} ms")

# %% [markdown]
# Notebook 05 takes this further: more nodes, more ranks per node, and what
# the topology of each level does.
#
# ## 6. Exercise 04.1: recursive doubling on point-to-point
#
# Recursive doubling for `p` a power of two: in step `k = 0, 1, …, lg p − 1`,
# rank `r` swaps its *whole* buffer with rank `r XOR 2^k` and adds what it
# received. After step `k` every rank holds the sum over a block of `2^(k+1)`
# ranks; after `lg p` steps, over all of them.
#
# Write `recursive_doubling_allreduce(tensor)`: sum `tensor` over all ranks in
# place (and return it) with `isend`/`irecv` (or `batch_isend_irecv`), for any
# power-of-two world size. The check runs it on the 4 emulated ranks, then on 2
# and 8 ranks, on float32 and int64 tensors of several lengths, against
# `dist.all_reduce`, and counts the bytes each rank sends: the cost model says
# `lg p` whole buffers, and no more.

# %%
# Exercise 04.1: implement recursive doubling all-reduce on point-to-point
def recursive_doubling_allreduce(tensor):
    # BEGIN SOLUTION
    rank, p = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(tensor)
    mask = 1
    while mask < p:
        partner = rank ^ mask
        ops = [dist.P2POp(dist.isend, tensor, partner), dist.P2POp(dist.irecv, incoming, partner)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        tensor.add_(incoming)  # only after both finished: we were sending from `tensor`
        mask *= 2
    return tensor
    # END SOLUTION


# %%
check_recursive_doubling(recursive_doubling_allreduce, cluster)

# %% [markdown]
# Non-powers of two need one more idea: MPICH first folds the `p − 2^⌊lg p⌋`
# extra ranks into partners (two extra whole-buffer steps). See
# `labsupport.schedules.recursive_doubling_all_reduce` and its `_fold`.
#
# ## 7. What real libraries do
#
# - **NCCL** implements rings and trees (and, on newer systems, CollNet, NVLS,
#   PAT), chosen per call from a tuning model of message size and topology, or
#   forced with `NCCL_ALGO` (`Ring`, `Tree`, …); the protocol (`NCCL_PROTO`:
#   `LL`, `LL128`, `Simple`) trades latency against bandwidth per message
#   (NVIDIA/nccl `src/init.cc`, `device.h`). Its trees are *double binary
#   trees*, added in NCCL 2.4: two trees that each carry half the data, so
#   that the tree reaches full bandwidth with logarithmic latency (NVIDIA's
#   blog "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019:
#   up to 180× lower latency than rings at 24k GPUs). To measure the network
#   itself, force `NCCL_ALGO=Ring` (nccl-tests issue 196).
# - **HCCL** (Ascend) chooses the intra-server algorithm from the hardware
#   (Mesh on a full HCCS mesh, Ring, …) and lets you choose the inter-server
#   one with `HCCL_ALGO`, e.g. `"level0:NA;level1:H-D_R"` (recursive halving-
#   doubling) or `ring`, `NHR`, `NB`, `pipeline`; setting it turns adaptive
#   selection off (CANN environment variable reference). On multi-server A2
#   systems an all-reduce runs as intra-server reduce-scatter, inter-server
#   all-reduce, intra-server all-gather: section 5's hierarchical algorithm.
#   HCCL's own documentation gives the same α-β-γ costs for Ring and RHD, and
#   `2α + (2/p)·nβ + …` for Mesh, where an NPU drives several HCCS links at
#   once (hicann/hccl, `coll_algo_intro`).
# - **In-network reduction** (NVIDIA SHARP in InfiniBand switches, NVLS in
#   NVSwitch) adds the data inside the switch: each GPU sends its buffer once
#   and receives the result once, instead of `2(p−1)/p` times. That is how an
#   all-reduce's busbw can exceed the link bandwidth: on H100 with NVLS about
#   480 GB/s against about 370 GB/s with a ring (nccl-tests issue 212, an NCCL
#   maintainer); nccl-tests gives the busbw factor `(n−1)/(n+1)` for it.
#
# ## 8. Fitting α and β on your own machine
#
# Back to real hardware, no emulation. `bench` measures a sweep and
# `fit_alpha_beta` fits the ring's α-β model to it (notebook 06 explains both).
# Use **at most as many ranks as cores**: here 2. With more ranks than cores,
# ranks wait for a core as well as for data, the wait depends on the scheduler
# rather than on the message size, and the straight line of the model no
# longer describes the points (notebook 06 shows the latency it costs).

# %%
cluster.shutdown()

# %% tags=["nbval-ignore-output"]
with lab.Cluster(2, backend="gloo") as real:
    records = bench.benchmark(real, "all_reduce", minbytes="4K", maxbytes="4M", stepfactor=4,
                              iters=10, warmup_iters=3, as_frame=False, show=False)
fit = bench.fit_alpha_beta(records, time="median_us")
print(fit)
fig = plot_bandwidth(records, fit, time="median_us")

# %% [markdown]
# The residual is the fit's honesty: how far, on average, the measured points
# sit from the line `a·α + b·β`, relative to the time. Per size:

# %% tags=["nbval-ignore-output"]
for r in records:
    if r["in_place"]:
        predicted = fit.time(r["size"], r["nranks"]) * 1e6
        print(f"{r['size']:>9} B: measured {r['median_us']:9.1f} µs, model {predicted:9.1f} µs, "
              f"residual {r['median_us'] / predicted - 1:+.0%}")

# %% [markdown]
# A few percent: the model describes your machine, and `1/β` is the rate at
# which your memory system copies between two processes. Tens of percent, or
# residuals that grow at one end: something else is going on (a busy machine,
# ranks competing for cores, caches at the small end), and α and β are not
# properties of the machine but of that run.
#
# ## Recap
#
# - The α-β(-γ) model: a message costs `α + nβ` (plus `nγ` to reduce it); an
#   algorithm's cost is its **steps** × α plus the **bytes per rank** × β.
# - Ring and Rabenseifner move the fewest bytes (`2n(p−1)/p`); recursive
#   doubling has the fewest steps (`lg p`); the binomial tree is worse than
#   recursive doubling on both counts, which is why NCCL's trees are double
#   binary trees, pipelined.
# - Small messages are latency-bound, large ones bandwidth-bound; two
#   algorithms cross where their `a + b·n` are equal, at a size proportional to
#   α/β.
# - Two levels of links call for a two-level algorithm: reduce-scatter inside,
#   all-reduce across, all-gather inside, so only `1/k` of the buffer crosses
#   the slow NICs.
# - Fit α and β with ranks ≤ cores, and read the residual before you believe them.
#
# ## Where to go next
#
# - Notebook 05 puts the algorithms on real topologies: meshes, rings and
#   switches inside a server, NICs between servers, and 8×N-card clusters.
# - Notebook 06 measures bandwidth the way nccl-tests does, on your machine or
#   a cluster; its α and β go straight into these formulas.
# - Notebook 07 hides communication behind computation, on this emulated
#   network.
