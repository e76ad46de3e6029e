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
# # 03 · Deriving ring AllReduce
#
# From "everything to rank 0" to the algorithm NCCL and HCCL run:
#
# - why the naive root is a bottleneck
# - why the whole-buffer ring of old tutorials moves $p/2$ times too much
# - reduce-scatter + all-gather on a ring: $2\frac{p-1}{p}n$ bytes per rank, optimal

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** This is the intellectual core of the day. Go slowly; draw the
# ring on the board if there is one. Learners who "know" ring all-reduce often
# know the whole-buffer version, which is slow: say so early.

# %% slideshow={"slide_type": "skip"}
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import costmodel
from labsupport.runtime.check.ring import counting_sends
from labsupport.runtime.viz.schedule import plot_schedule
from labsupport.schedules import execute, format_steps, naive_all_reduce, ring_all_reduce

# %load_ext labsupport

# %% slideshow={"slide_type": "skip"}
# 4 ranks for the %%ranks cells and cluster.run below; no spare group (no failure is shown here)
cluster = lab.Cluster(4)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The naive version: rank 0's link carries $2(p-1)\,n$

# %% slideshow={"slide_type": "-"}
n, P = 4 * 2**20, 4
naive = costmodel.cost(naive_all_reduce(P), n)
display(format_steps(naive_all_reduce(P)))
print("bytes sent per rank / n:", naive.sent_per_rank / n)
print("bytes received per rank / n:", naive.received_per_rank / n)

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Rank 0 receives p−1 tensors and sends p−1 tensors; every other
# link idles. The time grows linearly with p. These numbers are counted by
# `costmodel.cost` from the schedule written as data, the same object that is
# drawn and run on the next slides.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Cut the tensor into $p$ chunks, send one chunk per step
#
# $p-1$ steps of **reduce-scatter** (the receiver **adds**), then $p-1$ of **all-gather** (it **copies**).

# %% slideshow={"slide_type": "-"}
fig = plot_schedule(ring_all_reduce(P))

# %% [markdown] slideshow={"slide_type": "notes"}
# **6 min.** At step s, rank r sends chunk (r−s−1) mod p to the right in the
# reduce-scatter, chunk (r−s) mod p in the all-gather. Walk through the grids left to right: a row per rank, a column
# per chunk, darker = more of the sum; red arrows add, green arrows copy. After
# phase 1 rank r holds the complete chunk r, and only that (that *is*
# reduce_scatter); phase 2 is all_gather. In JupyterLab, `animate_schedule(ring)`
# gives a slider. Most frequent confusion: which chunk goes where at step s;
# point at one chunk and follow it round the ring.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## How many bytes? The lower bound, reached
#
# Each rank sends $2(p-1)$ chunks of $n/p$ bytes:
#
# $$\text{sent per rank} = 2\,\frac{p-1}{p}\,n \qquad\text{vs. whole-buffer ring } (p-1)\,n$$
#
# $$T_\text{ring} = 2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma$$

# %% slideshow={"slide_type": "-"}
for p in [2, 4, 8, 64, 1024]:
    # beta=1: the time is the bytes
    whole = costmodel.whole_buffer_ring_all_reduce_time(n, p, alpha=0, beta=1)
    chunked = costmodel.ring_all_reduce_time(n, p, alpha=0, beta=1)
    print(f"p={p:5}: whole-buffer {whole / n:7.2f}·n, chunked ring {chunked / n:.3f}·n")

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Why it is optimal (Patarasuk & Yuan 2009, in REFERENCES.md): count
# the whole group's traffic. Per element, every rank but the one that completes
# the sum must send its value (raw or in a partial sum), p−1 transfers, and the
# sum must then reach the p−1 others, p−1 more: 2(p−1)·n bytes over p ranks, so
# the busiest rank sends at least 2(p−1)/p·n. (Not "each rank must receive
# (p−1)/p·n for its share": a partial sum of the others' share is only n/p.)
# That is also where nccl-tests' busbw factor comes from. The whole-buffer ring is p/2
# times worse: for 1024 ranks, 1023n against 2n.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: the schedule runs on the ranks, and we count
#
# `schedules.execute` runs the same object on point-to-point; `counting_sends` watches every send.

# %% slideshow={"slide_type": "-"}
def run_ring(numel=1000):
    x = torch.arange(numel, dtype=torch.float32) * (dist.get_rank() + 1)
    want = x.clone()
    dist.all_reduce(want)
    with counting_sends() as sent:
        execute(ring_all_reduce(dist.get_world_size()), x)
    return torch.equal(x, want), sent[0] / numel


cluster = lab.current_cluster()
for rank, (right, sent) in enumerate(cluster.run(run_ring)):
    print(f"rank {rank}: equals dist.all_reduce: {right}, sent {sent:.2f}·n")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Expect 1.50·n for p = 4, on every rank, and a result equal to
# `dist.all_reduce`'s. 1000 elements split evenly into 4 chunks; ask what
# happens with 3 ranks (chunks of unequal size: the exercise's grader tries
# 3 and 4 ranks for that reason).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercise 03.1: ring all-reduce on point-to-point
#
# - in place, any $p \ge 1$, sizes not divisible by $p$
# - only `isend`/`irecv`/`batch_isend_irecv`
# - graded against `dist.all_reduce`, and the bytes you sent are counted
#
# Then: three widely copied versions that are slow or wrong.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min + 40 min hands-on.** What learners get wrong, in order of frequency:
# blocking recv before send (a deadlock: the grader stops it after its
# timeout and shows the stacks), sending the whole buffer, chunk indices off
# by one, and in the all-gather phase adding instead of copying (the sums
# come out too big). The second half of notebook 03 shows each as a "common mistake".
#
# **Next:** 04 · algorithms and cost models.

# %% slideshow={"slide_type": "skip"}
# %ranks shutdown
