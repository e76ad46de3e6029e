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

# %% [markdown]
# # 04 · Algorithms and cost models
#
# Notebook 03 derived one all-reduce, the ring. Libraries ship several: NCCL
# has rings and trees, HCCL rings, Mesh, recursive halving-doubling and more,
# MPI a dozen. Each wins somewhere. This notebook gives you the tool to say
# where, before you run anything: the **α-β(-γ) cost model**. Then it checks the
# model against real runs of real code on a network whose latency and
# bandwidth you choose.
#
# **You will leave this notebook able to**
# - write the α-β(-γ) cost of ring, binomial tree, recursive doubling,
#   recursive halving-doubling (Rabenseifner) and the two-level hierarchical
#   all-reduce, and say where each term comes from;
# - read whether a message is latency-bound or bandwidth-bound;
# - find the crossover size between two algorithms, in closed form and from the
#   curves, and say which way it moves when the network changes;
# - predict what a slower (less bandwidth) or a longer (more latency) network
#   does to each algorithm, and check it on an emulated network;
# - fit α and β to your own machine, and say when the fit means nothing.
#
# The pictures of sections 1 and 2 come with sliders (ipywidgets) for the
# latency, the bandwidth, the number of ranks and the message size. The
# exercises are **Exercise 04.1** (recursive doubling on point-to-point) and
# **Exercise 04.2** (a crossover size). Sources are in
# [REFERENCES.md](../../REFERENCES.md#cost-models-and-algorithms).

# %%
import functools
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import costmodel, netem, schedules
from labsupport.runtime import bench, emulator
from labsupport.runtime.check.algorithms import (
    check_crossover,
    check_recursive_doubling,
    crossover_reference,
)
from labsupport.runtime.viz import explore, table
from labsupport.runtime.viz.algorithms import plot_costs
from labsupport.runtime.viz.bandwidth import plot_bandwidth
from labsupport.units import format_rate, format_size, format_time

# %load_ext labsupport

# %% [markdown]
# ## 1. The model
#
# Sending a message of `n` bytes costs `α + n·β`: a fixed **latency** α (software
# overhead, the first byte's trip) and a time per byte β (1/β is the
# bandwidth). A reduction adds `n·γ` for the arithmetic. An algorithm is a
# sequence of steps; in each step every rank sends and receives at most one
# message at once (one port, full duplex), so a step costs as much as its
# largest message. Adding up the steps gives the table below, for `p` ranks
# (a power of two) and an `n`-byte buffer, lg = log₂. The tree, recursive
# doubling and Rabenseifner rows are Thakur, Rabenseifner and Gropp's (2005);
# the ring row is the ring reduce-scatter followed by the ring all-gather, the
# bandwidth-optimal all-reduce of Patarasuk and Yuan (2009) (MPICH itself
# added a ring all-reduce only in 2022, in MPICH 4.1):
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
# When `p` is not a power of two, recursive doubling and Rabenseifner first
# **fold** the `p − p′` extra ranks in, with `p′ = 2^⌊lg p⌋`: each extra rank
# adds its whole buffer into a partner before, and gets the result back after
# (MPICH does this). Two more steps that move the whole buffer: Rabenseifner
# then costs `(2 lg p′ + 2)α + (2(p′−1)/p′ + 2)nβ`, as HCCL's documentation of
# its RHD algorithm gives it. The ring needs no fold.
#
# `labsupport.costmodel` has each row as a function `f(n, p, α, β, γ)`, folded
# for any `p`. Take a slow network, α = 1 ms and 50 MB/s, the numbers of the
# emulated network used below, and 4 ranks:

# %%
ALGOS = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "recursive_doubling": costmodel.recursive_doubling_all_reduce_time,
    "rabenseifner": costmodel.rabenseifner_all_reduce_time,
}
net = netem.PRESETS["slow-ethernet"]
alpha, beta = net.inter.alpha, net.inter.beta
print(f"network: {net.inter}  ->  α = {format_time(alpha)}, β = {format_time(beta)} per byte")
ax = explore.cost_curves(ALGOS, alpha=alpha, beta=beta, p=4)

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
p = 4
for name, f in ALGOS.items():
    latency_part = f(0, p, alpha, 0)
    bytes_part_per_byte = f(1, p, 0, beta)
    print(f"{name:>20}: latency term = bandwidth term at n = "
          f"{latency_part / bytes_part_per_byte / 1e3:.3g} kB")

# %% [markdown]
# ### Which algorithm wins where
#
# The same model over a grid of world sizes and message sizes: each cell is
# coloured by the fastest algorithm. The rows are the powers of two from 2 to
# 1024, and 6, 12 and 24, where the folded algorithms pay their two extra
# steps. The circle marks p = 6 and 64 MiB:

# %%
ax = explore.winner_map(ALGOS, alpha=alpha, beta=beta, mark=(6, 64 << 20))
for q in (4, 6):
    times = ", ".join(f"{name} {format_time(ALGOS[name](64 << 20, q, alpha, beta))}"
                      for name in ("ring", "rabenseifner"))
    print(f"p = {q}, 64 MiB: {times}")

# %% [markdown]
# For a power of two, Rabenseifner moves the same bytes as the ring in `2 lg p`
# steps instead of `2(p−1)`, so in this model it is never slower than the ring:
# on those rows the ring wins nowhere. On the rows 6, 12 and 24 the fold's two
# whole-buffer steps cost more than the ring's extra latency once the message is
# large, and the ring takes the large messages back (the numbers above). The
# latency-bound corner belongs to recursive doubling at every `p`.
#
# The model leaves out what makes rings popular beyond that: a ring reaches the
# byte lower bound for any `p` (Patarasuk and Yuan, 2009), a rank only ever talks
# to its two neighbours (easy to map onto a physical ring or a few links), and
# in every step every link of the ring carries a chunk. Count the transfers per
# step of the ring's schedule on 6 ranks, against Rabenseifner's:

# %%
for build in (schedules.ring_all_reduce, schedules.rabenseifner_all_reduce):
    sched = build(6)
    print(f"{sched.name:>24}: transfers per step {[len(list(step)) for step in sched.steps]}")

# %% [markdown]
# Six ranks, six transfers in each of the ring's 10 steps: every link busy all
# the time. Folded Rabenseifner leaves the two extra ranks idle in its inner
# steps. Notebook 05 adds the wiring to the model.
#
# ### Turn the knobs
#
# The cell below draws both pictures again with four sliders: the latency α,
# the bandwidth 1/β, the number of ranks `p` (the curves on the left are for
# that `p`) and a message size (the dashed line on the left, the circle on the
# right, and the fastest algorithm there named in the legend and the title).
# A slider redraws both pictures when you let it go; they need a running kernel
# (the stored notebook shows the first view). Try: latency ×10 and ÷10; a
# bandwidth of 50 GB/s; p = 24 at 64 MiB.

# %%
explore.explore(ALGOS, alpha=alpha, beta=beta, p=4, size=1 << 20)

# %% [markdown]
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
    print(f"p = {q:2d}: closed form {crossover_reference(q, alpha, beta) / 1e3:.3g} kB; "
          f"on the curves Rabenseifner first wins at {fine[np.argmax(rab < rd)] / 1e3:.3g} kB")

# %% [markdown]
# Every crossover between two algorithms has the form `n* = Δa / Δb`, the
# difference of their latency terms (a multiple of α) over the difference of
# their per-byte terms (a multiple of β): so `n*` is proportional to **α/β**.
# Multiply α by 10 and it moves right (larger) 10×; divide the bandwidth by 10,
# which multiplies β by 10, and it moves **left** 10×.
# `explore.crossover_size(f, g, p, α, β)` computes it for any two closed forms;
# the ring against recursive doubling on 4 ranks:

# %%
NETWORKS = {
    "as above": (alpha, beta),
    "latency ×10": (10 * alpha, beta),
    "bandwidth ÷10": (alpha, 10 * beta),
}
ring, rd = ALGOS["ring"], ALGOS["recursive_doubling"]
for label, (a, b) in NETWORKS.items():
    n_star = explore.crossover_size(rd, ring, 4, a, b)
    print(f"{label:>14}: ring and recursive doubling cross at {n_star / 1e3:,.0f} kB")

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
# **What is emulated, what is real.** Only the *clock* is emulated. Each rank
# keeps its own clock, and while a network is emulated `time.perf_counter()`
# (and `monotonic()`) on a rank reads it: a message costs what its link says,
# carries its send time to the receiver, and a collective's steps chain on that
# clock. Real: the data (it really moves, over gloo), the results (gloo's sums),
# and the CPU work, which the clock charges at its measured CPU time (so γ, the
# cost of a reduction, is your CPU's). A rank waiting for a core or for
# loopback pays nothing on that clock, so the times are the same on a quiet
# laptop and a busy one, and nothing sleeps through wire time (a cell runs in
# less time than the emulated times it prints).
# **Not modelled:** a γ you choose, congestion beyond the queues above, other
# jobs on the links, packet loss, protocols (NCCL's LL/Simple), in-network
# reduction, and compute and communication slowing each other down on a device.
# The link model is `labsupport/netem/link.py` (`Link`, `LinkClock`: a few lines),
# the network of links `labsupport/netem/network.py`; what the emulator does with them
# is said in full in `labsupport/runtime/emulator/__init__.py`.
#
# The built-in collectives run a real algorithm over these emulated links,
# chosen with `emulator.set_algorithm(name)` on the ranks, or at start-up with
# `Network(algorithm=...)` or the `LAB_ALGO` environment variable (the way
# `NCCL_ALGO` and `HCCL_ALGO` choose).

# %% tags=["nbval-ignore-output"]
cluster = lab.Cluster(4, network="slow-ethernet")
print(cluster.network)

# %% [markdown]
# The timing is the loop notebook 06 built, and what you would run on a real
# cluster: device tensors, a warm-up, then for each iteration synchronize,
# barrier, clock, run, synchronize, clock, and the *slowest* rank's time.
# `labsupport.runtime.bench.timing.time_iterations` is that loop; on the emulated
# network its `time.perf_counter()` reads the emulated clock. The function
# below times `dist.all_reduce`, or any `run(x)` you give it.

# %%
def time_all_reduce(sizes, iters=3, run=dist.all_reduce):
    """On every rank: seconds per run(x) at each size (the slowest rank's, median of iters)."""
    from labsupport.runtime.bench.timing import time_iterations
    from labsupport.runtime.launch import rank_device

    seconds = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, device=rank_device())
        seconds.append(time_iterations(lambda i, x=x: run(x), iters, device=x.device).median)
    return seconds


def measure(cluster, algorithms, sizes, iters=3):
    """{algorithm: (sizes, seconds)} measured on the cluster's ranks."""
    out = {}
    for name in algorithms:
        cluster.run(emulator.set_algorithm, name)
        out[name] = (sizes, cluster.run(time_all_reduce, sizes, iters)[0])
    return out


# %% [markdown]
# Four algorithms, four sizes from 4 KiB to 2 MiB. Lines are the model of
# section 1, dots what the ranks measured:

# %%
MEASURED_SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20]
measured = measure(cluster, ALGOS, MEASURED_SIZES)
ax = explore.cost_curves(ALGOS, alpha=alpha, beta=beta, p=4, sizes=np.logspace(11, 22, 23, base=2),
                         measured=measured,
                         title="4 ranks over slow-ethernet: model (lines), measured (dots)")

# %% [markdown]
# Every measurement beside its model, and what the measurement adds per step
# of the algorithm:

# %% tags=["nbval-ignore-output"]
steps = {name: len(netem.schedule_for("all_reduce", name, 4)) for name in ALGOS}
explore.measured_vs_model(measured, lambda name, n: ALGOS[name](n, 4, alpha, beta), steps.get)

# %% tags=["nbval-ignore-output"]
ratios = {(name, n): t / ALGOS[name](n, 4, alpha, beta)
          for name, (ns, ts) in measured.items() for n, t in zip(ns, ts, strict=True)}
worst = max(ratios, key=lambda k: abs(ratios[k] - 1))
print(f"measured / model from {min(ratios.values()):.3f} to {max(ratios.values()):.3f}; "
      f"farthest from 1: {worst[0]} at {format_size(worst[1])}, {ratios[worst]:.3f}")
print("every measurement within 5 % of its model" if abs(ratios[worst] - 1) <= 0.05
      else "some measurements are more than 5 % off their model")

# %% [markdown]
# The model has γ = 0 and counts only the links; the emulated clock also
# charges each step's CPU work on the rank: adding the received data in, and
# the emulator's own bookkeeping. That is the last column of the table, the
# measured excess per step of the algorithm: it is why a ratio sits above 1,
# by more where a step's wire time is short (small sizes). At large sizes the
# ratio comes back to about 1; what grows there is the excess per step, not
# the ratio, most for the tree and recursive doubling, which add the whole
# buffer at every step. An excess per step that grows with the size is the
# reduction's γ, your CPU's.
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
# The gray dotted line in each panel is the ring on the network as it was.

# %% tags=["nbval-ignore-output"]
CHANGED_SIZES = [4 << 10, 64 << 10, 1 << 20]
PAIR = {n: ALGOS[n] for n in ("ring", "recursive_doubling")}
changes = {"latency ×10": net.scaled(latency=10), "bandwidth ÷10": net.scaled(bandwidth=0.1)}
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
for ax, (label, changed) in zip(axes, changes.items(), strict=True):
    cluster.run(emulator.set_network, changed)
    a, b = changed.inter.alpha, changed.inter.beta
    xs = np.logspace(11, 21, 21, base=2)
    ax.loglog(xs, [ALGOS["ring"](s, 4, alpha, beta) * 1e3 for s in xs], ":", color="gray",
              label="ring before")
    explore.cost_curves(PAIR, alpha=a, beta=b, p=4, sizes=xs, ax=ax,
                        measured=measure(cluster, PAIR, CHANGED_SIZES, iters=2),
                        title=f"{label}: {changed.inter}")
cluster.run(emulator.set_network, net)
fig.tight_layout()

# %% [markdown]
# The model's numbers, to hold your prediction against:

# %%
rows = []
for label, (a, b) in NETWORKS.items():
    row = {"network": label}
    for size in (4 << 10, 1 << 20):
        for name, f in PAIR.items():
            row[f"{name}\n{format_size(size)}"] = format_time(f(size, 4, a, b))
    row["winner\nat 1 MiB"] = explore.winner(PAIR, 1 << 20, 4, a, b)[0]
    rows.append(row)
table(rows)

# %% [markdown]
# <details><summary>Answer</summary>
#
# 1. Latency ×10 multiplies the flat left part of each curve by 10, so each
#    curve moves up by its number of steps × 9 ms: the ring, with three times
#    as many steps as recursive doubling at p = 4, moves up the most. At 1 MiB
#    the winner **flips**: the ring's six latencies now outweigh the extra bytes
#    recursive doubling moves, and recursive doubling wins (the table above).
#    The crossover moves right 10×.
# 2. Bandwidth ÷10 multiplies the rising right part by 10: the large sizes
#    move by almost 10×. At 4 KiB the ring moves little, but recursive
#    doubling, which sends the whole 4 KiB at each of its steps, rises by about
#    two thirds (the table above). At 1 MiB recursive doubling, which moves
#    more bytes, falls further behind the ring. The crossover moves **left**
#    10× (the sizes printed at the end of section 2).
# </details>
#
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
# Inside a node, where every pair of ranks has its own link, the phases run
# **direct** (HCCL's Mesh): each rank sends each of the others its piece at
# once, on all `k − 1` links. Its cost, with α, β inside a node and α′, β′
# between nodes: `2(α + n/k·β) + 2(m−1)α′ + 2(n/k)(m−1)/m·β′` (γ left out). On
# the `two-nodes` preset (nodes of 2 ranks, a fast mesh inside, slow NICs
# between), three algorithms, modelled by simulating their schedules on those
# links (`netem.model_time`) and measured:

# %%
two_nodes = netem.PRESETS["two-nodes"]
print(two_nodes)
cluster.run(emulator.set_network, two_nodes)
HIER = ("ring", "rabenseifner", "hierarchical")
HIER_SIZES = [64 << 10, 1 << 20, 4 << 20]
hier_sizes = np.logspace(12, 22, 21, base=2)
hier_model = {n: [netem.model_time("all_reduce", n, int(s), 4, two_nodes) for s in hier_sizes]
              for n in HIER}
hier_measured = measure(cluster, HIER, HIER_SIZES, iters=2)
ax = plot_costs(hier_sizes, hier_model, hier_measured, title="all-reduce on 2 nodes × 2 ranks")

# %% tags=["nbval-ignore-output"]
hier_steps = {n: len(netem.schedule_for("all_reduce", n, 4, 2)) for n in HIER}
explore.measured_vs_model(
    hier_measured,
    lambda name, n: netem.model_time("all_reduce", name, n, 4, two_nodes),
    hier_steps.get,
)

# %% [markdown]
# The flat ring is the slowest: its ring of 4 ranks crosses the NICs on two of
# its links, and every step waits for the slowest link. The hierarchical
# version sends only half the buffer across the NICs, and the intra-node
# phases run on the fast mesh. Rabenseifner costs the same here, for a reason
# the next subsection shows. The ratios tell the same story as in section 3:
# the model counts the links, the clock adds each step's CPU work. The closed
# form above, beside the schedule's time on the same links (no run) at 4 MiB:

# %%
n = 4 << 20
closed = costmodel.hierarchical_all_reduce_time(
    n, 4, two_nodes.intra.alpha, two_nodes.intra.beta, ranks_per_node=2,
    inter_alpha=two_nodes.inter.alpha, inter_beta=two_nodes.inter.beta,
)  # fmt: skip
scheduled = netem.model_time("all_reduce", "hierarchical", n, 4, two_nodes)
same = math.isclose(closed, scheduled, rel_tol=1e-9)
print(f"closed form {format_time(closed)}, schedule on the links {format_time(scheduled)}: "
      + ("the same" if same else f"the closed form is {closed / scheduled:.3f}x the schedule"))

# %% [markdown]
# ### Which partner first?
#
# Rabenseifner's halving meets its partners `r XOR 2^k` in some order. Starting
# with the **nearest** (rank `r XOR 1`, which here is on the same node) sends
# the big half, `n/2`, over the fast link, and only `n/4` across the NICs.
# Starting with the **farthest** (`r XOR 2`, on the other node) sends the big
# half over the slow NICs. MPICH's all-reduce, ASTRA-sim's `HalvingDoubling`
# and HCCL's RHD (on hierarchical networks) start near; MPICH's reduce-scatter
# starts far, so that rank `r` ends with block `r`. Both orders, run by the
# schedule engine over point-to-point on the emulated two-node network, beside
# the link model's time for the same schedule:

# %% tags=["nbval-ignore-output"]
for order in schedules.ORDERS:
    sched = schedules.rabenseifner_all_reduce(4, order=order)
    partners = [next(t.dst for t in step if t.src == 0) for step in sched.steps[:2]]
    run = functools.partial(schedules.execute, sched)
    took = cluster.run(time_all_reduce, [n], 2, run)[0][0]
    model = netem.simulate_on_network(sched, n, two_nodes).max()
    print(f"{order:>14}: rank 0 meets {partners[0]}, then {partners[1]}; 4 MiB in "
          f"{format_time(took)} measured, {format_time(model)} modelled")
hierarchical = netem.model_time("all_reduce", "hierarchical", n, 4, two_nodes)
print(f"  hierarchical: {format_time(hierarchical)} modelled")
cluster.run(emulator.set_network, net)

# %% [markdown]
# Starting near, Rabenseifner on two levels is a two-level algorithm: compare
# its time with the hierarchical algorithm's, printed last. Starting far, it
# pays the slow link for the biggest half.
#
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
# `lg p` whole buffers, and no more. Your function need not fold: on 6 ranks
# rank 5's partner at step 1 would be 7, which does not exist.

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
#   PAT), and the protocol (`NCCL_PROTO`: `LL`, `LL128`, `Simple`) trades
#   latency against bandwidth per message (NVIDIA/nccl `src/init.cc`,
#   `device.h`). It chooses per call with a model of its own, close to this
#   one: for each algorithm and protocol a latency and a bandwidth, and the
#   predicted time `latency + n / bandwidth`; the smallest wins
#   (`src/graph/tuning.cc`: `ncclTopoTuneModel`, `ncclTopoGetAlgoTime`;
#   `src/enqueue.cc`: `ncclGetAlgoInfo` and `topoGetAlgoInfo` now; up to
#   NCCL 2.19 the entry point was `getAlgoInfo`). The
#   ring's latency there grows with its `2(p−1)` steps, the tree's with
#   `lg` of the number of nodes (`2((p/nodes − 1)·intraLat + lg(nodes)·interLat)`:
#   a chain inside each node, the tree across), and the tree's bandwidth is set lower than
#   the ring's: so at many nodes trees take the small and medium messages and
#   rings keep the large ones. `NCCL_ALGO` (`Ring`, `Tree`, …) forces a
#   choice; to measure the network itself, force `NCCL_ALGO=Ring` (nccl-tests
#   issue 196).
# - **NCCL's trees are double binary trees**, added in NCCL 2.4 (Sanders,
#   Speck and Träff, 2009; NVIDIA's blog "Massively Scale Your Deep Learning
#   Training with NCCL 2.4", 2019). NCCL builds them over **nodes**
#   (`ncclGetDtree(nNodes, …)` in `src/graph/connect.cc`), with a chain of the
#   ranks inside each node; the course's schedule builds the same trees over
#   ranks, as if every rank were a node. In one binary tree the leaves, half the
#   nodes, only send, while the interior ones receive from two children and
#   send on: the links are unevenly loaded. In the second tree every leaf of
#   the first is interior and the other way round; each tree carries half the
#   data, pipelined in blocks, so every rank does the same work and the pair
#   reaches full bandwidth with a latency that grows with `lg p`. The reason is
#   **bandwidth balance**. (`schedules.double_binary_tree_all_reduce` builds
#   NCCL's two trees; `emulator.set_algorithm("double_binary_tree")` runs them.)
#   ASTRA-sim's `doubleBinaryTree` is a different algorithm: it alternates
#   whole chunks of the collective between its two trees, one tree per chunk
#   (`DoubleBinaryTreeTopology::get_topology` returns one tree, then the
#   other), where NCCL splits every buffer between both trees at once.
# - **HCCL** (Ascend) chooses the intra-server algorithm from the hardware
#   (Mesh on a full HCCS mesh, Ring, …) and lets you choose the inter-server
#   one with `HCCL_ALGO`, e.g. `"level0:NA;level1:H-D_R"` (recursive
#   halving-doubling) or `ring`, `NHR`, `NB`, `pipeline`; setting it turns adaptive
#   selection off (CANN environment variable reference). On multi-server A2
#   systems an all-reduce runs as intra-server reduce-scatter, inter-server
#   all-reduce, intra-server all-gather: section 5's hierarchical algorithm.
#   HCCL's own documentation gives the same α-β-γ costs for Ring and RHD
#   (folded as in section 1), and `2α + (2/p)·nβ + …` for Mesh, where an NPU
#   drives several HCCS links at once (hicann/hccl, `coll_algo_intro`).
# - **In-network reduction** (NVIDIA SHARP in InfiniBand switches, NVLS in
#   NVSwitch) adds the data inside the switch: each GPU sends its buffer once
#   and receives the result once, instead of `2(p−1)/p` times. That is how an
#   all-reduce's busbw can exceed the link bandwidth: on H100 with NVLS about
#   480 GB/s against about 370 GB/s with a ring (nccl-tests issue 212, an NCCL
#   maintainer). nccl-tests' PERFORMANCE.md gives no busbw factor for it: a
#   proposed `(p−1)/(p+1)` sits in a pull request that was not merged
#   (nccl-tests #239), and the maintainer there wrote `algbw = busbw·p/(p+1)`.
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
print(f"dotted line: where the fit's latency and bandwidth terms are equal, "
      f"{format_size(fit.crossover(2))}")
fig = plot_bandwidth(records, fit, time="median_us")

# %% [markdown]
# The dashed lines are the fitted model; the dotted vertical line marks the
# size where its two terms are equal (printed above), the bend between the
# latency-bound and the bandwidth-bound regime. The residual is the fit's
# honesty: per size, model / measured − 1 (the model's error relative to the
# measured time, what `fit_alpha_beta` minimises), and the verdict is its RMS
# over the sizes. Both, computed from this run:

# %% tags=["nbval-ignore-output"]
for r in records:
    if r["in_place"]:
        predicted = fit.time(r["size"], r["nranks"])
        measured_s = r["median_us"] * 1e-6
        print(f"{format_size(r['size']):>8}: measured {format_time(measured_s):>8}, "
              f"model {format_time(predicted):>8}, "
              f"residual (model / measured - 1) {predicted / measured_s - 1:+.0%}")
GOOD_FIT = 0.10  # RMS relative residual below which we take α and β as the machine's
if fit.residual <= GOOD_FIT:
    print(f"RMS residual {fit.residual:.0%} <= {GOOD_FIT:.0%}: the model describes this run; "
          f"α = {format_time(fit.alpha)}, 1/β = {format_rate(1 / fit.beta)}")
else:
    print(f"RMS residual {fit.residual:.0%} > {GOOD_FIT:.0%}: the model does not describe this "
          "run, and its α and β are not your machine's")

# %% [markdown]
# When the residual is small, α is your machine's per-message overhead and
# `1/β` is the rate gloo moves data between two processes of this machine: TCP
# over the loopback interface, not the rate your memory copies. When it is
# large, or the residuals grow at one end, something else is going on: a busy
# machine, ranks competing for cores, caches at the small end. What makes the
# fit mean something: ranks ≤ *idle* cores (close other programs), more
# iterations (`iters=100` and a median), and a sweep that reaches well past the
# dotted line on both sides. On a cluster, run the same sweep under `torchrun`
# (notebook 06) and fit that.
#
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/costmodel/formulas.py`: the α-β(-γ) closed forms (`ring_all_reduce_time` and the others).
# - `labsupport/costmodel/schedule.py` (`cost`): the same counts read off any schedule's steps.
# - `labsupport/costmodel/fit.py` (`fit_alpha_beta`): α and β fitted to measurements.
# - `labsupport/schedules/halving.py`: recursive doubling and halving-doubling (Rabenseifner).
# - `labsupport/schedules/trees.py`: NCCL's double binary tree.
# - `labsupport/schedules/builders.py`: the binomial trees and the direct (mesh) algorithm.
# - `labsupport/schedules/registry.py` (`BUILDERS`): every algorithm by name.
# - `labsupport/netem/link.py`: the link model (`Link`, `LinkClock`).
# - `labsupport/netem/network.py` (`Network`): ranks on nodes, a mesh inside, one NIC each between.
# - `labsupport/netem/simulate.py` (`simulate_on_network`): a schedule played through the links, on paper.
# - `labsupport/netem/plans.py` (`schedule_for`): which schedule each algorithm runs.
#
# ## Recap
#
# - The α-β(-γ) model: a message costs `α + nβ` (plus `nγ` to reduce it); an
#   algorithm's cost is its **steps** × α plus the **bytes per rank** × β.
# - Ring and Rabenseifner move the fewest bytes (`2n(p−1)/p`); recursive
#   doubling has the fewest steps (`lg p`); the binomial tree is worse than
#   recursive doubling on both counts. When `p` is not a power of two, the
#   logarithmic algorithms fold, and the ring takes the large messages.
# - NCCL's trees are double binary trees: two trees, each rank a leaf in one
#   and interior in the other, for **bandwidth balance**, so the pair reaches
#   full bandwidth with logarithmic latency. NCCL picks ring or tree per call
#   from its own latency-bandwidth model.
# - Small messages are latency-bound, large ones bandwidth-bound; two
#   algorithms cross where their `a + b·n` are equal, at a size proportional to
#   α/β: a slower link (larger β) moves it left, a longer one (larger α) right.
# - Two levels of links call for a two-level algorithm: reduce-scatter inside,
#   all-reduce across, all-gather inside, so only `1/k` of the buffer crosses
#   the slow NICs; halving from the nearest partner does the same for
#   Rabenseifner.
# - The emulated network emulates the clock only: data, results and CPU work
#   are real. Fit α and β on real hardware with ranks ≤ cores, and read the
#   residual before you believe them.
#
# ## Where to go next
#
# - Notebook 05 puts the algorithms on real topologies: meshes, rings and
#   switches inside a server, NICs between servers, and 8×N-card clusters.
# - Notebook 06 measures bandwidth the way nccl-tests does, on your machine or
#   a cluster; its α and β go straight into these formulas.
# - Notebook 07 hides communication behind computation, on this emulated
#   network.
