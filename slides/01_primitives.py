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
# # 01 · Collective primitives
#
# A *collective*: every rank of a group calls it together, each with its own data.
#
# - broadcast, reduce, **all_reduce**, all_gather, gather, scatter,
#   **reduce_scatter**, all_to_all, barrier
# - which training technique uses which
# - how many bytes each rank moves: where nccl-tests' "busbw" factors come from

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** The notebook draws every primitive; the deck shows the four that
# training lives on and leaves the rest to the hands-on time. Notation for the
# whole day: `p` ranks, a buffer of `n` bytes.

# %% slideshow={"slide_type": "skip"}
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport.runtime.launch import rank_device
from labsupport.runtime.viz.ranks import show_ranks

# %load_ext labsupport

# %% slideshow={"slide_type": "skip"}
# 4 ranks for the %%ranks cells and cluster.run below; no spare group (no failure is shown here)
cluster = lab.Cluster(4)

# %% slideshow={"slide_type": "skip"}
def before_after(name):
    """On every rank: (before, after) of one collective on [10r, 10r+1, 10r+2, 10r+3]."""
    rank, p, device = dist.get_rank(), dist.get_world_size(), rank_device()
    x = torch.arange(4.0, device=device) + 10 * rank
    before = x.clone()
    if name == "all_reduce":
        dist.all_reduce(x)
        return before, x
    if name == "reduce_scatter":
        mine = torch.empty(4 // p, device=device)
        dist.reduce_scatter_tensor(mine, x)
        return before, mine
    if name == "all_gather":
        out = torch.empty(4 * p, device=device)
        dist.all_gather_into_tensor(out, x)
        return before, out
    out = torch.empty(4, device=device)
    dist.all_to_all_single(out, x)
    return before, out


# %% [markdown] slideshow={"slide_type": "slide"}
# ## all_reduce: the sum, on every rank
#
# One row per rank, before (left) and after (right); colours follow values.
# `before_after(name)` runs one collective on `[10r, 10r+1, 10r+2, 10r+3]` on each rank.

# %% slideshow={"slide_type": "-"}
results = cluster.run(before_after, "all_reduce")
show_ranks([b for b, _ in results], [a for _, a in results], title="all_reduce(x, op=SUM)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The workhorse of data-parallel training (DDP): every rank ends
# with the same gradients. In place: the input is gone afterwards. Ask what
# rank 2 holds: `[60, 64, 68, 72]`, like everybody. The picture is drawn by
# `show_ranks`, the same function the notebook uses; `cluster.run` brought the
# tensors back to this kernel.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## reduce_scatter: rank $j$ keeps chunk $j$ of the sum

# %% slideshow={"slide_type": "-"}
results = cluster.run(before_after, "reduce_scatter")
show_ranks([b for b, _ in results], [a for _, a in results], title="reduce_scatter_tensor(mine, x)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Predict first: after reduce_scatter, rank 1 holds element 1 of
# the sum, 64. Each rank keeps one chunk of an all_reduce's result.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## all_gather: every rank gets every piece
#
# With reduce_scatter, the two halves of an all_reduce.

# %% slideshow={"slide_type": "-"}
results = cluster.run(before_after, "all_gather")
show_ranks([b for b, _ in results], [a for _, a in results], title="all_gather_into_tensor(out, x)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Say the sentence of the day:
# **all_reduce = reduce_scatter + all_gather**. That is how the ring all-reduce of notebook 03 works, and how
# ZeRO/FSDP split it: reduce_scatter the gradients, all_gather the parameters.
# Learners often think all_gather sums; it only concatenates, in rank order.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## all_to_all: a transpose of the (rank × chunk) grid

# %% slideshow={"slide_type": "-"}
results = cluster.run(before_after, "all_to_all")
show_ranks([b for b, _ in results], [a for _, a in results], title="all_to_all_single(out, x)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Chunk `j` of rank `i` becomes chunk `i` of rank `j`: column
# `j` of the left grid is row `j` of the right one. Mixture-of-experts layers
# use it to send each token to its expert's rank; with unequal counts it takes
# two all-to-alls (first the counts, then the tokens): the notebook shows it.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which technique uses which
#
# | technique | collective(s) |
# |---|---|
# | data parallel (DDP) | all_reduce of gradients |
# | ZeRO / FSDP | reduce_scatter (gradients), all_gather (parameters) |
# | tensor parallel | all_reduce / all_gather of activations |
# | mixture of experts | all_to_all of tokens |
# | pipeline parallel | send / recv between stages (notebook 02) |

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** This table is what learners take back to their job. Ask the room
# which row their own training uses. Pipeline parallelism is point-to-point,
# not a collective: that is notebook 02.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Bytes each rank sends (an optimal algorithm)
#
# | collective | $S$ is | bytes per rank | busbw factor |
# |---|---|---|---|
# | all_reduce | the buffer | $2\frac{p-1}{p}S$ | $2(p-1)/p$ |
# | reduce_scatter, all_gather, all_to_all | the whole buffer | $\frac{p-1}{p}S$ | $(p-1)/p$ |
# | broadcast, reduce | the buffer | $S$ | 1 |
#
# algbw $= S/t$, busbw $=$ algbw $\times$ factor: comparable with the link's bandwidth.

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** The factors are nccl-tests' (its PERFORMANCE.md, in
# REFERENCES.md). Point out that the bytes per rank *do not grow* with p: they
# tend to 2S. What grows with p is the number of steps (latency), notebook 04.
# Common mistake: comparing algbw of all_reduce with the link's bandwidth and
# concluding the network is "twice as fast as its spec".

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reduction operations differ by backend
#
# **Predict:** rank $r$ holds $[r+1, 2^r]$. What do `PRODUCT` and `BXOR` give on 4 ranks?

# %% slideshow={"slide_type": "-"}
# %%ranks
for op in ("SUM", "PRODUCT", "MAX", "BXOR"):
    dtype = torch.int64 if op == "BXOR" else torch.float32
    x = torch.tensor([rank + 1, 2**rank], dtype=dtype, device=device)
    dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
    if rank == 0:
        print(f"{op:8} {x.tolist()}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Answer: PRODUCT `[24, 64]`, BXOR `1^2^3^4 = 4`, `1^2^4^8 = 15`.
# gloo in torch 2.13 supports all eight ops; HCCL refuses BAND/BOR/BXOR and
# emulates AVG as SUM then divide; gloo refuses PREMUL_SUM. Portable code sticks
# to SUM (divide yourself), MIN, MAX, PRODUCT.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Asynchronous calls: hands off until `wait()`
#
# ```python
# work = dist.all_reduce(big, async_op=True)   # returns at once
# other = a @ b                                # fine: other tensors
# big[-1].item()                               # DON'T: still in flight
# work.wait()                                  # now big holds the sum
# ```
#
# **Now:** notebook 01, exercises 01.1–01.4. **Next:** 02 · point-to-point.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min + 35 min hands-on.** Until `wait()` returns, reading the output gives
# a mix of old and new values, writing the input changes what others receive.
# On NPUs and GPUs `wait()` makes the stream wait, not the CPU: notebook 06
# shows why timing then needs a synchronize. During the exercises the usual
# trap is 01.3/01.4: the all_reduce-and-slice shortcut is right but sends twice
# the bytes of a real reduce_scatter.

# %% slideshow={"slide_type": "skip"}
# %ranks shutdown
