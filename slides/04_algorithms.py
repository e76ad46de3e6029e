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

# %%

# %% [markdown] slideshow={"slide_type": "slide"}
# # 04 · Algorithms and cost models
#
# - the α-β(-γ) model: latency per message, time per byte, reduction per byte
# - ring, binomial tree, recursive doubling, Rabenseifner
# - the crossover size, and which algorithm wins where
# - the model against real runs on an emulated network

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Notebook 03 counted bytes; this one adds the cost of a message.
# The goal is that learners can say, for their own cluster, "below this size
# latency dominates, above it bandwidth".

# %% slideshow={"slide_type": "skip"}
import numpy as np

import labsupport as lab
from labsupport import costmodel, netem
from labsupport.viz.algorithms import plot_costs, plot_winner_map

# %% [markdown] slideshow={"slide_type": "slide"}
# ## A message of $n$ bytes costs $\alpha + n\beta$
#
# | all-reduce | steps | cost |
# |---|---|---|
# | ring | $2(p-1)$ | $2(p-1)\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma$ |
# | binomial tree | $2\lg p$ | $2\lg p\,(\alpha + n\beta) + \lg p\,n\gamma$ |
# | recursive doubling | $\lg p$ | $\lg p\,(\alpha + n\beta + n\gamma)$ |
# | Rabenseifner | $2\lg p$ | $2\lg p\,\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma$ |
#
# Thakur, Rabenseifner & Gropp (2005).

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Read the table as two columns: the α column counts steps, the β
# column counts bytes per rank. Ring and Rabenseifner reach the byte lower
# bound of notebook 03; tree and recursive doubling move the whole buffer at
# every step. No algorithm wins both columns. Learners often think "tree is
# faster than ring" in general: it depends on n and p, the next picture shows.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Two regimes: latency-bound, bandwidth-bound

# %% slideshow={"slide_type": "-"}
ALGOS = {
    "ring": costmodel.ring_all_reduce_time,
    "tree": costmodel.tree_all_reduce_time,
    "recursive_doubling": costmodel.recursive_doubling_all_reduce_time,
    "rabenseifner": costmodel.rabenseifner_all_reduce_time,
}
net = netem.PRESETS["slow-ethernet"]
alpha, beta = net.inter.alpha, net.inter.beta
sizes = np.logspace(10, 26, 33, base=2)  # 1 KiB .. 64 MiB
model = {name: [f(n, 4, alpha, beta) for n in sizes] for name, f in ALGOS.items()}
ax = plot_costs(sizes, model, title="all-reduce on 4 ranks, α = 1 ms, 50 MB/s (model)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Left: flat curves, time = steps × α, recursive doubling (fewest
# steps) wins. Right: slope 1, time = bytes × β, ring and Rabenseifner win.
# The bend is where the two terms are equal; for the ring, n = p·α/β. The
# network numbers are those of the emulated `slow-ethernet` preset used in the
# live demo.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which algorithm wins where

# %% slideshow={"slide_type": "-"}
ranks = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
grid_sizes = np.logspace(3, 30, 28, base=2)  # 8 B .. 1 GiB
grid = {name: np.array([[f(n, q, alpha, beta) for n in grid_sizes] for q in ranks])
        for name, f in ALGOS.items()}  # fmt: skip
ax = plot_winner_map(ranks, grid_sizes, grid, title="fastest all-reduce (α = 1 ms, 50 MB/s)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** More ranks make the ring's 2(p−1) steps expensive, so the region
# of the logarithmic algorithms grows with p. This is why NCCL switches to
# trees at scale and why HCCL offers H-D_R (recursive halving-doubling) between
# servers. Crossover of recursive doubling vs Rabenseifner:
# n* = lg p·α / ((lg p − 2(p−1)/p)·β): exercise 04.2.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: the model on an emulated network
#
# `labsupport.netem`: real gloo traffic, each message delivered when a link of
# latency α and bandwidth 1/β would have delivered it. 4 KiB is latency-bound:
# **predict** ring vs recursive doubling.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
def time_it(algorithm, nbytes, iters=3):
    """On every rank: the fastest of `iters` runs of the slowest rank's all_reduce time."""
    import time

    import torch
    import torch.distributed as dist

    netem.set_algorithm(algorithm)
    x = torch.ones(nbytes // 4)
    dist.all_reduce(x)  # warm-up
    best = float("inf")
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(x)
        elapsed = torch.tensor([time.perf_counter() - start])
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        best = min(best, float(elapsed))
    return best


NBYTES = 4096
with lab.Cluster(4, network="slow-ethernet") as cluster:
    for name in ("ring", "recursive_doubling"):
        measured = cluster.run(time_it, name, NBYTES)[0]
        print(f"{name:>18}: measured {measured * 1e3:5.1f} ms, "
              f"model {ALGOS[name](NBYTES, 4, alpha, beta) * 1e3:5.1f} ms")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Expect about 6 ms for the ring (6 steps of 1 ms) and about 2 ms
# for recursive doubling (2 steps): the measurement sits above the model
# (Python and loopback add to each message, several ms more on a busy laptop),
# but the order and the rough ratio hold.
# Why emulate: on a laptop every "link" is the same memory bus, so real
# timings say nothing about algorithms. The notebook measures all four
# algorithms at four sizes and a two-level hierarchical all-reduce.
#
# **Now:** notebook 04, 40 min (fit α and β to your own machine at the end).
# **Next:** 05 · topology.
