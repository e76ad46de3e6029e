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
# # 06 · Measuring bandwidth
#
# - why naive timing lies: asynchronous calls, the first call, one rank's clock
# - the benchmark loop: warm-up, barrier, synchronize, many iterations, max over ranks
# - algbw and busbw, with nccl-tests' factors
# - latency- and bandwidth-bound regimes; the same benchmark under `torchrun`

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** The numbers engineers compare across clusters come from
# nccl-tests (and Ascend's hccl_test). This deck is about getting numbers that
# can be compared. Say upfront: on a 2-core laptop, only ranks ≤ cores give
# meaningful timings; with more, the stopwatch measures the OS scheduler.

# %% slideshow={"slide_type": "skip"}
import os

import labsupport as lab
from labsupport.runtime import bench
from labsupport.runtime.viz import table
from labsupport.runtime.viz.bandwidth import plot_bandwidth

# %load_ext labsupport

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The call returns before the work is done
#
# On NPUs and GPUs a collective is *queued* on a stream; the host clock then
# measures the queueing. gloo's `async_op=True` shows the same mistake on a CPU:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
# %%ranks -n 2
import time

x = torch.ones(4 * 2**20, device=device)  # 16 MiB of float32
dist.all_reduce(x)  # warm-up
start = time.perf_counter()
work = dist.all_reduce(x, async_op=True)
returned = time.perf_counter() - start
work.wait()
finished = time.perf_counter() - start
print(f"returned after {returned * 1e3:6.2f} ms, finished after {finished * 1e3:6.2f} ms")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** The first number is microseconds whatever the size: that is what
# a benchmark without `torch.npu.synchronize()` / `torch.cuda.synchronize()`
# reports on a device. `bench.synchronize(device)` picks the right call (and
# does nothing on the CPU). Learners who time with `time.time()` around one
# call on one rank make three mistakes at once: no sync, no warm-up, one rank.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The loop to copy to a cluster
#
# ```python
# dist.all_reduce(x)                       # warm-up: set-up costs, first touch
# synchronize(device); dist.barrier()      # start together, nothing queued
# start = time.perf_counter()
# for _ in range(iters):
#     dist.all_reduce(x)
# synchronize(device)                      # wait for the device, not the queue
# t = torch.tensor([(time.perf_counter() - start) / iters], device=device)
# dist.all_reduce(t, op=dist.ReduceOp.MAX) # the slowest rank's time
# ```
#
# algbw $= S/t$ · busbw $=$ algbw $\times\, 2\frac{p-1}{p}$ (all_reduce), $\frac{p-1}{p}$ (all_gather, reduce_scatter) · GB $=10^9$ B

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Every line answers a mistake: warm-up (first call pays set-up),
# barrier (ranks start together), synchronize (the host runs ahead of the
# device), many iterations (clock resolution), MAX (the collective is done when the slowest
# rank is). busbw is comparable with a link's bandwidth; algbw is not. A
# popular article does warm up and barrier, then times each call with
# time.time() and no synchronize, keeps rank 0's times, computes 2·S/t in code
# but prints S/t in its sample output, and names no busbw factor: a good
# "spot the bug" moment.

# %% slideshow={"slide_type": "skip"}
# %ranks shutdown

# %% slideshow={"slide_type": "skip"}
P = max(2, min(4, os.cpu_count() or 1))  # one rank per core, at least 2, at most 4

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: a sweep, in nccl-tests' columns
#
# In place; the notebook prints nccl-tests' whole table (out-of-place too).

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
with lab.Cluster(P) as cluster:
    records = bench.benchmark(cluster, "all_reduce", show=False, as_frame=False, minbytes="1K",
                              maxbytes="1M", stepfactor=4, iters=10, warmup_iters=3)  # fmt: skip
columns = ["size", "count", "type", "redop", "time_us", "algbw", "busbw", "wrong"]
table([r for r in records if r["in_place"]], columns, formats={"time_us": ".1f"})

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** One rank per core (at least 2, at most 4). Open notebook 06's
# section 3 to show the whole table as nccl-tests prints it. The columns are
# nccl-tests': size, count, type, redop, root, time,
# algbw, busbw, #wrong, out-of-place and in-place. `#wrong` counts mismatched
# elements: a benchmark that also checks the result. Warn that on a shared
# laptop the numbers move from run to run: the notebook fits the *median*.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Two regimes, one fit

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
fit = bench.fit_alpha_beta(records, in_place=True, time="median_us")
fig = plot_bandwidth(records, fit, in_place=True, time="median_us")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The fit (α, β and the RMS residual) is printed in the title, with
# dashed lines. Left: time flat, latency-bound, busbw tiny. Right: time grows
# with size, busbw approaches 1/β. The crossover S* = where the α and β terms
# are equal. If busbw still rises at your largest size, you have not reached
# the bandwidth-bound regime: sweep further (`BIG_SWEEP = True` in the notebook).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The same benchmark on a real cluster
#
# ```bash
# torchrun --standalone --nproc_per_node=8 -m labsupport.runtime.bench -b 8 -e 1G -f 2 --json ar_1x8.json
# torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --master_addr=<server 0> \
#     --master_port=29500 -m labsupport.runtime.bench -b 8 -e 1G -f 2 --json ar_2x8.json
# ```
#
# Back in notebook 06: `bench.load_json("ar_1x8.json")`, `fit_alpha_beta`, `plot_bandwidth`.
#
# **Now:** notebook 06, 40 min. **Next:** 07 · overlap.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Record the HCCL/NCCL variables you set next to the results
# (HCCL_ALGO, HCCL_BUFFSIZE...): another HCCL_ALGO is another experiment.
# hccl_test prints algorithm bandwidth only, no busbw: multiply by the factor
# before comparing with nccl-tests. With a server in the room, show a real
# `ar_1x8.json` here (see INSTRUCTOR.md).
