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
# # 06 · Measuring bandwidth right
#
# Everybody who trains on more than one device ends up quoting a bandwidth:
# "AllReduce runs at 40 GB/s on our cluster". Whether that number means
# anything depends less on the hardware than on the stopwatch: when it
# started, when it stopped, on which rank, and which formula turned the time
# into GB/s. This notebook builds the stopwatch properly, then uses it.
#
# **You will leave this notebook able to**
# - say why `time.time()` around a collective lies (asynchronous launches, the
#   first call, one rank's clock), and what a correct benchmark does instead;
# - turn a time into *algbw* and *busbw*, derive the busbw factor of each
#   collective, and explain why busbw is the number to compare with a link;
# - fix a broken benchmark (Exercise 06.1);
# - sweep message sizes for all_reduce, all_gather and reduce_scatter, read
#   the latency-bound and bandwidth-bound regimes, and fit the α-β model;
# - correct a published benchmark, and convert Ascend `hccl_test` output to busbw;
# - run the same benchmark with `torchrun` on an 8-NPU server or two.
#
# Notation, as in notebook 03: **p** ranks, a buffer of **S** bytes; KiB and
# MiB are 2¹⁰ and 2²⁰ bytes, GB/s is 10⁹ bytes per second (nccl-tests'
# convention). The sources are listed in
# [REFERENCES.md](../../REFERENCES.md#bandwidth-and-benchmarking).
#
# The tool is `labsupport.runtime.bench`, which speaks nccl-tests' options and prints
# nccl-tests' table, so your numbers can sit next to anyone else's.

# %%
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import costmodel, schedules
from labsupport.runtime import bench
from labsupport.runtime.check.bandwidth import check_fixed_benchmark
from labsupport.runtime.launch import rank_device
from labsupport.runtime.viz.bandwidth import plot_bandwidth

# %load_ext labsupport

# %% [markdown]
# Timings are only worth reading when every rank has a core of its own: with
# more ranks than cores, a rank often waits for the operating system to give
# it a core, and the stopwatch measures the scheduler. So the group here has
# one rank per core (at least 2, at most 4). Section 4b runs the
# oversubscribed case on purpose, as its own experiment.

# %% tags=["nbval-ignore-output"]
CORES = os.cpu_count() or 1
P = max(2, min(4, CORES))  # ranks: one per core, between 2 and 4
cluster = lab.Cluster(world_size=P)
print(f"{CORES} CPU cores here: a group of {P} ranks")
cluster

# %% [markdown]
# ## 1. Why naive timing lies
#
# ### 1a. The call returns before the work is done
#
# On an NPU or a GPU, `dist.all_reduce(x)` *queues* the operation on a device
# stream and returns to Python. The data moves later, while Python runs ahead.
# A host clock read right after the call therefore measures how long it took
# to *queue* the work: a few microseconds, whatever the message size. The fix
# is to wait for the device (`torch.npu.synchronize()`,
# `torch.cuda.synchronize()`) before reading the clock.
# `bench.synchronize(device)` picks the right one for the device type, and does
# nothing on the CPU.
#
# The cell below times one 16 MiB all_reduce twice on every rank: when the call
# returns, and after synchronizing. On this CPU with gloo the two agree: gloo's
# calls only return when the work is done. Run the same cell on an NPU or GPU
# (it uses each rank's `device`) and the first number collapses to the
# launch time.

# %% tags=["nbval-ignore-output"]
# %%ranks --show 0,1
import time

from labsupport.runtime import bench

x = torch.ones(4 * 2**20, device=device)  # 16 MiB of float32
dist.all_reduce(x)  # one untimed call first (see 1b)
bench.synchronize(device)

start = time.perf_counter()
dist.all_reduce(x)
returned = time.perf_counter() - start
bench.synchronize(device)
finished = time.perf_counter() - start
print(f"{device}: the call returned after {returned * 1e3:7.2f} ms, "
      f"the work finished after {finished * 1e3:7.2f} ms")

# %% [markdown]
# gloo can show you what "returning early" looks like, too: with
# `async_op=True` it runs the collective on a background thread and hands back
# a `Work` handle at once. Timing the call alone is then the mistake a
# benchmark without synchronize makes on a device:

# %% tags=["nbval-ignore-output"]
# %%ranks --show 0,1
start = time.perf_counter()
work = dist.all_reduce(x, async_op=True)
returned = time.perf_counter() - start
work.wait()
finished = time.perf_counter() - start
print(f"async call returned after {returned * 1e3:7.2f} ms, "
      f"wait() came back after {finished * 1e3:7.2f} ms")

# %% [markdown]
# ### 1b. The first call pays for set-up
#
# The first collectives of a run pay one-off costs: memory that is touched for
# the first time, buffers the library allocates and keeps, and on GPUs the
# communicator itself — PyTorch's `init_process_group` documentation says the
# NCCL communicator is formed lazily, at the first collective, unless you pass
# `device_id`. A benchmark therefore runs a few untimed *warm-up* iterations
# (nccl-tests' `-w`, default 5) before it starts the clock.
#
# Two of these costs can be seen on a CPU. Each timing below goes through the
# benchmark's own `bench.time_case(run, iters, device)`: synchronize, barrier,
# synchronize, start the clock, run, synchronize, stop the clock.
#
# **First touch of a buffer.** A fresh 16 MiB buffer is memory the process
# has never written: the operating system maps each page when the collective
# first writes it. We time all_reduce on a new buffer each call, then on one
# buffer reused.

# %%
def one_call(run, device):
    """Seconds for one call of run() on this rank, lined up and synchronized."""
    seconds, _ = bench.time_case(run, 1, device)
    return seconds


def first_touch(numel=4 * 2**20, calls=5):
    """(median seconds on a fresh buffer each call, median on one reused buffer)."""
    device = rank_device()
    fresh = []
    for _ in range(calls):
        y = torch.empty(numel, device=device)  # new memory, never written
        fresh.append(one_call(lambda y=y: dist.all_reduce(y), device))
    y = torch.ones(numel, device=device)
    dist.all_reduce(y)  # touched once
    reused = [one_call(lambda: dist.all_reduce(y), device) for _ in range(calls)]
    return statistics.median(fresh), statistics.median(reused)


def new_group_calls(numel=256, calls=11):
    """(the first call's seconds on a brand-new group, the median of the next ones)."""
    device = rank_device()
    group = dist.new_group(list(range(dist.get_world_size())))
    z = torch.ones(numel, device=device)
    times = [one_call(lambda: dist.all_reduce(z, group=group), device) for _ in range(calls)]
    return times[0], statistics.median(times[1:])


def slowest(per_rank):
    """Each measurement's slowest rank: the group's time."""
    return [max(values) for values in zip(*per_rank, strict=True)]


# %% tags=["nbval-ignore-output"]
fresh, reused = slowest(cluster.run(first_touch))
print(f"16 MiB all_reduce: {fresh * 1e3:6.1f} ms on fresh buffers, {reused * 1e3:6.1f} ms reused "
      f"(ratio {fresh / reused:.1f})")
first, rest = slowest(cluster.run(new_group_calls))
print(f" 1 KiB all_reduce on a new group: first call {first * 1e6:6.0f} µs, "
      f"median of the next {rest * 1e6:6.0f} µs (ratio {first / rest:.1f})")
for what, ratio in (("a fresh buffer", fresh / reused), ("a new group", first / rest)):
    if ratio >= 1.5:
        print(f"-> {what}: the first use is {ratio:.1f}× slower here; warm-up keeps that out")
    elif ratio >= 0.8:
        print(f"-> {what}: barely visible here ({ratio:.1f}×); on a device it can be much larger")
    else:
        print(f"-> {what}: the first call was not the slow one here ({ratio:.1f}×):\n"
              "   other work on this machine swamped the effect; rerun when it is quiet")

# %% [markdown]
# The fresh-buffer cost is one reason a benchmark reuses its buffers and a
# training loop allocates them once. On a GPU the caching allocator hides
# first touch after the first step, but the communicator set-up is there
# instead. Whatever you run on, measure it: the first calls are not the
# steady state.

# %% [markdown]
# ### 1c. One rank's clock is not the group's
#
# A collective finishes on a rank only when every rank has joined in. If one
# rank arrives late (it had more work, a slower data loader, a page fault),
# the others *wait inside the collective*, and their timers count the wait as
# communication. Below, rank 0 arrives 20 ms late, and each rank times one
# 4 KiB all_reduce, many times over (the median is printed): by its own clock,
# then lined up (synchronize, barrier, synchronize before the clock starts),
# then lined up with nobody late, for reference.
#
# **Predict, then run.** By its own clock, which rank sees the 20 ms? And
# lined up?

# %%
def time_with_a_late_rank(line_up, delay_s=0.02, trials=9):
    """Median milliseconds of one all_reduce on this rank, when rank 0 arrives delay_s late."""
    device = rank_device()
    x = torch.ones(1024, device=device)  # 4 KiB
    dist.all_reduce(x)  # warm-up
    times = []
    for _ in range(trials):
        bench.synchronize(device)
        dist.barrier()  # every trial starts from the same moment
        if dist.get_rank() == 0:
            time.sleep(delay_s)  # rank 0 is busy elsewhere
        if line_up:
            bench.synchronize(device)
            dist.barrier()
            bench.synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(x)
        bench.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


# %% tags=["nbval-ignore-output"]
naive = cluster.run(time_with_a_late_rank, False)
lined_up = cluster.run(time_with_a_late_rank, True)
nobody_late = cluster.run(time_with_a_late_rank, True, 0.0)
print("median ms of one all_reduce:   own clock   lined up   lined up, nobody late")
for rank, times in enumerate(zip(naive, lined_up, nobody_late, strict=True)):
    columns = zip(times, (23, 11, 12), strict=True)
    print(f"rank {rank}:" + "".join(f"{t:{w}.2f}" for t, w in columns))
spread = max(naive) - min(naive)
print(f"-> own clocks differ by {spread:.1f} ms across ranks: rank 0's 20 ms delay, counted "
      "by the others as communication")
excess = max(lined_up) - max(nobody_late)  # ms that lining up did not remove
if excess < 0.1 * 20:
    print(f"-> lined up, the slowest rank sees {max(lined_up):.2f} ms, {max(nobody_late):.2f} ms "
          "with nobody late: the 20 ms delay is out of the measurement")
else:
    print(f"-> lined up, the slowest rank still sees {excess:.1f} ms more than with nobody late: "
          "this machine was busy; rerun")

# %% [markdown]
# <details><summary>Answer</summary>
#
# By their own clocks, every rank *but* rank 0: the others wait inside the
# all_reduce for the late rank and count the wait as communication. Rank 0's
# clock does not show the delay, but it is not the group's time either: it
# starts when rank 0 arrives, after its peers had started. Lined up, the late
# rank no longer shows: every rank sees about what it sees when nobody is
# late (the last line above checks it).
# </details>
#
# Two lessons. Start every timed loop *together*: synchronize the device,
# barrier, synchronize again, then start the clock. And report a time for the
# *group*: nccl-tests averages over ranks by default (`-a 1`) and offers rank
# 0's time (`-a 0`), the minimum (`-a 2`) and the maximum (`-a 3`), which is
# the time the slowest rank saw. `labsupport.runtime.bench` does all of this:
#
# 1. fill the buffers with known values, run `-w` warm-up calls;
# 2. synchronize, barrier, synchronize, read the clock;
# 3. run `-n` calls back to back (stamping each with a device event, so the
#    spread can be shown), synchronize, read the clock: time = elapsed / n;
# 4. combine the ranks' times as `-a` says;
# 5. fill again, make one call, and count the elements that differ from the
#    exactly known answer, summed over ranks: `#wrong`.

# %% [markdown]
# ## 2. algbw and busbw
#
# The time t of one call turns into a bandwidth in two ways (nccl-tests'
# conventions, `doc/PERFORMANCE.md`):
#
# - **algbw = S / t**, where S is the data size of the call (for all_gather,
#   reduce_scatter and all_to_all, the whole p-rank buffer);
# - **busbw = algbw × factor**, a factor that depends on the collective and
#   on p, chosen so that busbw can be compared with the bandwidth of one link.
#
# **Where the all_reduce factor comes from.** Count the traffic of the whole
# group, whatever the algorithm (the counting argument of notebook 03). Take
# one element of the buffer: its p values, one per rank, must meet. Every rank
# except the one where the sum is first completed has to send its value away
# at least once, raw or inside a partial sum: p − 1 transfers. Then the
# finished sum has to reach the p − 1 other ranks: p − 1 more. So the group
# moves at least 2(p − 1) values per element, 2(p − 1) · S bytes in all, over
# p ranks' links. Spread as evenly as it can be, that is 2(p−1)/p · S bytes
# per rank, and the busiest rank sends at least that much. (The bound is about
# the total: one rank need not *receive* (p−1)/p · S to finish its own share,
# since a partial sum of the other ranks' values for that share is only S/p
# bytes.) If each rank's link moves B bytes per second,
#
# $$ t \;\ge\; \frac{2(p-1)}{p}\cdot\frac{S}{B}
# \quad\Longleftrightarrow\quad
# B \;\ge\; \frac{S}{t}\cdot\frac{2(p-1)}{p} \;=\; \text{busbw}. $$
#
# Ring all-reduce reaches the bound (notebook 03 counted its bytes), and
# Patarasuk & Yuan (2009) prove that no algorithm built from point-to-point
# transfers does better. So busbw close to the link's bandwidth means the
# collective uses the hardware fully, *whatever the algorithm and the number
# of ranks*; algbw, by contrast, falls as p grows even on perfect hardware.
#
# **When busbw exceeds the link.** The bound assumes the ranks do the
# additions. With *in-network reduction* (NVIDIA SHARP in InfiniBand switches,
# NVLS in NVSwitch systems) the switch adds: each rank sends its S bytes once
# and receives the result once, so t approaches S/B and the busbw computed with
# 2(p−1)/p can exceed the link bandwidth. On 8 H100s an NCCL maintainer reports
# about 480 GB/s all_reduce busbw with NVLS and about 370 GB/s with rings, over
# NVLink that moves 450 GB/s per direction (nccl-tests issue 212). nccl-tests'
# PERFORMANCE.md gives no factor for that case: a proposed (p−1)/(p+1) sits in
# a pull request that was not merged (nccl-tests #239), where the maintainer
# wrote algbw = busbw·p/(p+1) instead.
#
# **Broadcast and reduce: factor 1.** Only the root must send the whole
# buffer (broadcast) or receive it (reduce), so t ≥ S/B from the root's link
# alone; a pipelined chain, where every rank forwards each piece as it arrives,
# reaches it. The other factors are in the recap.
#
# The cost model of [notebook 04](04_algorithms.ipynb) counts the same bytes
# from the ring's schedule:

# %%
p, S = 4, 1_000_000
sent = costmodel.cost(schedules.ring_all_reduce(p), S).sent_per_rank
print(f"ring all_reduce of {S:,} bytes on {p} ranks: each rank sends {sent[0]:,.0f} bytes")
print(f"2(p-1)/p · S = {2 * (p - 1) / p * S:,.0f}")

# %% [markdown]
# ### Exercise 06.1: fix this broken benchmark
#
# Here is a benchmark of the kind found in blog posts. It runs on every rank
# and returns (seconds per call, algbw, busbw). It has four bugs — find them
# with sections 1 and 2 in mind:

# %%
def broken_benchmark(x, iters=10):
    """Seconds per all_reduce of x, then algbw and busbw in GB/s (runs on every rank)."""
    size = x.numel() * x.element_size()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    seconds = (time.perf_counter() - start) / iters
    t = torch.tensor([seconds], dtype=torch.float64, device=x.device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    algbw = size / t.item() / 1e9
    return t.item(), algbw, 2 * algbw


# %% [markdown]
# On this CPU its numbers look plausible, because gloo returns only when the
# work is done and the group is already warm:

# %% tags=["nbval-ignore-output"]
def run_broken(numel=2**20):
    return broken_benchmark(torch.ones(numel, device=rank_device()))


seconds, algbw, busbw = cluster.run(run_broken)[0]
print(f"broken_benchmark, 4 MiB on {P} ranks: {seconds * 1e6:.0f} µs per call, "
      f"algbw {algbw:.3f} GB/s, busbw {busbw:.3f} GB/s")

# %% [markdown]
# So the check does not trust this machine. It runs your function, and then
# the benchmark's own timed loop, on a *simulated* asynchronous device: a
# virtual clock on which all_reduce returns at once and the device works
# later, the first call pays a set-up cost, and each rank's device has its own
# speed. The two must agree; when they do not, the message says what your
# numbers suggest is missing.
#
# Write `benchmark_all_reduce(x, iters=10)`, same signature and results, that
# agrees with `labsupport.runtime.bench`. Use `time.perf_counter()` for the clock and
# `bench.synchronize(x.device)` to wait for the device.

# %%
# Exercise 06.1: fix the broken benchmark
def benchmark_all_reduce(x, iters=10):
    # BEGIN SOLUTION
    p = dist.get_world_size()
    size = x.numel() * x.element_size()
    for _ in range(5):  # warm-up: the first calls pay for set-up
        dist.all_reduce(x)
    bench.synchronize(x.device)  # nothing left in the queue,
    dist.barrier()  # every rank starts together,
    bench.synchronize(x.device)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    bench.synchronize(x.device)  # stop the clock when the work is done
    seconds = (time.perf_counter() - start) / iters
    t = torch.tensor([seconds], dtype=torch.float64, device=x.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the group's time: the slowest rank's
    algbw = size / t.item() / 1e9
    return t.item(), algbw, algbw * 2 * (p - 1) / p
    # END SOLUTION


# %%
check_fixed_benchmark(benchmark_all_reduce, cluster)

# %% [markdown]
# ## 3. A first benchmark
#
# `bench.benchmark(cluster, collective, ...)` runs on the cluster's ranks and
# prints nccl-tests' table: for each size, the time, algbw, busbw and `#wrong`
# out-of-place (separate input and output buffers) and in-place (one buffer).
# The options have nccl-tests' names: `minbytes` (-b), `maxbytes` (-e),
# `stepfactor` (-f), `iters` (-n), `warmup_iters` (-w), `average` (-a).
#
# **Read the out-of-place column with care.** torch's all_reduce, broadcast
# and reduce are always in place (one tensor is input and output), so for
# those three the benchmark's out-of-place column times a copy of the input
# plus the in-place call — what keeping your input costs in torch, not a
# separate algorithm. The α-β fits below use the in-place column.

# %% tags=["nbval-ignore-output"]
first = bench.benchmark(
    cluster, "all_reduce", minbytes="1K", maxbytes="1M", stepfactor=4,
    iters=10, warmup_iters=3, as_frame=False,
)  # fmt: skip

# %% [markdown]
# The results come back as data: one record per size and column (a pandas
# DataFrame instead, if pandas is installed). Each keeps every timed
# iteration, so you can look at the spread, not only the mean:

# %%
first[0]["collective"], sorted(first[0])

# %% tags=["nbval-ignore-output"]
in_place = [r for r in first if r["in_place"]]
fig, ax = plt.subplots(figsize=(7, 3))
ax.boxplot([r["iter_us"] for r in in_place])
ax.set_xticklabels([str(r["size"]) for r in in_place])
ax.set(yscale="log", xlabel="size (bytes)", ylabel="time per call (µs)",
       title=f"all_reduce, {P} ranks: each timed iteration")  # fmt: skip
fig.tight_layout()

# %% [markdown]
# A wide box, or a mean far from the median, says the machine was busy or the
# run too short: more iterations (`-n`) help, and so does an idle machine. On
# a laptop shared with a browser, expect boxes.

# %% [markdown]
# ## 4. Sweeping sizes: latency-bound and bandwidth-bound
#
# A collective costs a fixed latency per message (α) plus a time per byte (β).
# The α-β model of [notebook 04](04_algorithms.ipynb) says, for ring
# all_reduce on p ranks,
#
# $$ t(S) = 2(p-1)\,\alpha \;+\; \frac{2(p-1)}{p}\,S\,\beta . $$
#
# Small messages are **latency-bound**: t barely changes with S, so busbw
# grows in proportion to S. Large ones are **bandwidth-bound**: t grows with
# S, and busbw flattens out towards 1/β. The two terms are equal at the
# crossover size S* = p·α/β. We sweep all_reduce, all_gather and
# reduce_scatter on our p ranks. The default sweep is small enough for CI;
# set `BIG_SWEEP = True` for a longer one that shows the bandwidth-bound
# regime more clearly.

# %%
BIG_SWEEP = False
SWEEP = dict(
    minbytes="1K", maxbytes="64M" if BIG_SWEEP else "4M", stepfactor=4,
    iters=40 if BIG_SWEEP else 20, warmup_iters=5,
)  # fmt: skip
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")

# %% tags=["nbval-ignore-output"]
results_dir = Path(tempfile.mkdtemp(prefix="bench-"))
sweeps = {
    name: bench.benchmark(cluster, name, as_frame=False, json=str(results_dir / f"{name}.json"),
                          **SWEEP)  # fmt: skip
    for name in COLLECTIVES
}

# %% [markdown]
# Fit α and β to the all_reduce sweep (the in-place column), and read off the
# crossover. The fit weighs each point by its relative error, so that the
# microsecond points count as much as the millisecond ones; the RMS residual
# says how well the straight α-β story describes this machine.
#
# We fit the *median* of the timed iterations (`time="median_us"`) rather
# than nccl-tests' mean: on a shared machine a few iterations that lost their
# core to another process pull the mean up, and the median ignores them.

# %% tags=["nbval-ignore-output"]
fit = bench.fit_alpha_beta(sweeps["all_reduce"], in_place=True, time="median_us")
print(fit)
print(f"{P} ranks: latency and bandwidth terms are equal at S* = {fit.crossover(P):,.0f} bytes")
quality = "close" if fit.residual < 0.15 else "rough" if fit.residual < 0.4 else "poor"
print(f"-> a {quality} fit: the model is off by {fit.residual:.0%} on a typical point here")

# %% tags=["nbval-ignore-output"]
fig = plot_bandwidth(sweeps["all_reduce"], fit, in_place=True, time="median_us")

# %% [markdown]
# Read the plot from left to right. At the small sizes the time is nearly
# flat: each call pays the latencies and hardly any bytes, and busbw climbs
# with S. Past the crossover (dotted line) time grows with S and busbw bends
# towards its ceiling. On this CPU the "links" are loopback sockets and memory
# copies, so α is large; the residual above says how well two numbers describe
# this run (on a shared machine, a rerun can move it a lot). On an NPU server,
# α is microseconds and 1/β is the HCCS or RoCE link.
#
# ### All three collectives, and gloo's reduce_scatter
#
# In the model, a reduce_scatter or an all_gather moves half of what an
# all_reduce of the same S moves ((p−1)/p · S against 2(p−1)/p · S per
# rank), so at large sizes it should take about half the time. Their busbw
# factors are half of all_reduce's, so with ideal algorithms the three busbw
# curves meet. Compare:

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(7, 3.5))
for name, records in sweeps.items():
    _, rows = costmodel.select_rows(records, name, None)
    rows = sorted(rows, key=lambda r: r["size"])
    busbw = [r["size"] / r["median_us"] / 1e3 * bench.busbw_factor(name, P) for r in rows]
    ax.loglog([r["size"] for r in rows], busbw, "o-", label=name)
ax.set(xlabel="S (bytes)", ylabel="busbw (GB/s)", title=f"{P} ranks, gloo, median times")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()


# %% [markdown]
# Where the busbw curves do not meet, two different things can pull them
# apart, and the sweep cannot tell which: the time of a CPU "link" is not only
# bytes (copies through the operating system, the scheduling of the ranks),
# and gloo does not run a real reduce_scatter. In torch's gloo backend,
# `reduce_scatter_tensor` runs an all_reduce of the whole buffer and keeps its
# own chunk (PyTorch PR 118911: "still 2x communication than a real
# reduce-scatter"), and the list form `reduce_scatter` runs one all_reduce per
# rank (PR 149869): the shortcut of Exercise 01.3 in
# [notebook 01](01_primitives.ipynb), whose profiler showed it.
#
# **An experiment that isolates the shortcut.** Time, on one buffer of S
# bytes, `reduce_scatter_tensor` next to the shortcut written by hand
# (all_reduce of a copy of the buffer, keep my chunk), interleaved so that a
# busy moment of the machine hits both alike. If gloo runs the shortcut, the
# two take the same time (ratio ≈ 1); a real reduce-scatter moves half the
# bytes of the all_reduce, so at large S its ratio would approach ½. The
# same against all_gather, which has no shortcut, shows how far a real
# algorithm gets from ½ on this machine. Each is timed many times, and the
# fastest trial kept: on a machine shared with other work, the fastest trial
# is the one least disturbed by it.

# %%
def against_the_shortcut(numel=2**20, trials=15, calls=3):
    """Fastest seconds per call on this rank: each collective, and the all_reduce shortcut."""
    device, p, rank = rank_device(), dist.get_world_size(), dist.get_rank()
    x = torch.ones(numel, device=device)
    out = torch.empty(numel // p, device=device)

    def shortcut():
        whole = x.clone()
        dist.all_reduce(whole)
        out.copy_(whole.tensor_split(p)[rank])

    runs = {
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(out, x),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(x, out),
        "shortcut": shortcut,
    }
    for run in runs.values():
        run()  # warm-up
    times = {name: [] for name in runs}
    for _ in range(trials):  # interleaved: a busy moment hits all of them
        for name, run in runs.items():
            times[name].append(bench.time_case(run, calls, device)[0])
    return {name: min(t) for name, t in times.items()}  # the least disturbed trial


# %% tags=["nbval-ignore-output"]
numel = 2**20  # 4 MiB of float32
per_rank = cluster.run(against_the_shortcut, numel)
group = {name: max(r[name] for r in per_rank) for name in per_rank[0]}  # the slowest rank
S_iso = numel * 4
half = (costmodel.ring_reduce_scatter_time(S_iso, P, 0, 1)
        / costmodel.ring_all_reduce_time(S_iso, P, 0, 1))
print(f"S = {S_iso / 2**20:.0f} MiB on {P} ranks; the shortcut (all_reduce + keep my chunk): "
      f"{group['shortcut'] * 1e3:.2f} ms")
rs = group["reduce_scatter_tensor"] / group["shortcut"]
ag = group["all_gather_into_tensor"] / group["shortcut"]
rs_is_shortcut = abs(math.log(rs)) < abs(math.log(rs / half))
print(f"reduce_scatter_tensor : {rs:.2f}× the shortcut, nearer "
      + ("1 (the shortcut)" if rs_is_shortcut else f"{half:.2f} (a real reduce-scatter)"))
print(f"all_gather_into_tensor: {ag:.2f}× the shortcut, "
      + ("faster, as half the bytes should be" if ag < 0.75
         else "no faster: bytes do not set the time here"))
if rs_is_shortcut and ag < 0.75:
    print("-> isolated: same traffic, same time; a collective with half the traffic is faster")
else:
    print("-> not isolated in this run (a busy machine?): rerun, or trust notebook 01's profiler")

# %% [markdown]
# The lines above are computed, verdicts included. When the experiment
# isolates the shortcut, `reduce_scatter_tensor` costs what the hand-written
# all_reduce costs (it *is* that all_reduce), while `all_gather_into_tensor`,
# which moves half the bytes with no shortcut, is clearly faster. (It can be
# even faster than ½: the all_reduce also adds, and copies more.) So a gloo
# reduce_scatter busbw is not comparable with an NCCL or HCCL one, which runs
# a real reduce-scatter: compare like with like, and know what your backend
# runs before reading its busbw.
#
# The fitted α is per message: the 2(p−1) messages of the ring are part of
# the model. That is why, in principle, one α and one β describe every world
# size. The next experiment tests that on purpose, by breaking the
# one-rank-per-core rule.

# %% [markdown]
# ### 4b. Experiment: more ranks than cores
#
# The model says the fixed cost of a ring all_reduce grows like 2(p−1): going
# from p to 2p ranks multiplies the small-message time by (2p−1)/(p−1). We
# start a second group of 2p ranks, on the same cores, and time 1 KiB
# all_reduces:

# %% tags=["nbval-ignore-output"]
small = dict(minbytes="1K", maxbytes="1K", iters=50, warmup_iters=5, as_frame=False)
base = bench.benchmark(cluster, "all_reduce", **small)
with lab.Cluster(world_size=2 * P) as crowd:
    crowded = bench.benchmark(crowd, "all_reduce", **small)

# %% tags=["nbval-ignore-output"]
t_base = next(r["median_us"] for r in base if r["in_place"])
t_crowd = next(r["median_us"] for r in crowded if r["in_place"])
model = (costmodel.ring_all_reduce_time(1024, 2 * P, 1, 0)
         / costmodel.ring_all_reduce_time(1024, P, 1, 0))
measured = t_crowd / t_base
print(f"1 KiB all_reduce: {t_base:.0f} µs on {P} ranks, {t_crowd:.0f} µs on {2 * P} ranks, "
      f"{CORES} cores")
print(f"measured ratio {measured:.1f}×, the α-β model predicts {model:.1f}×")
if 2 * P > CORES and measured > 1.5 * model:
    print(f"-> {2 * P} ranks on {CORES} cores: far above the model. Each message also waits\n"
          "   for the receiving rank to get a core, so 'α' measures the scheduler.")
elif 2 * P > CORES:
    print(f"-> {2 * P} ranks on {CORES} cores, yet near the model this time: the scheduler\n"
          "   was kind. Rerun, and distrust either number.")
else:
    print(f"-> {2 * P} ranks fit on {CORES} cores: the ratio is in the model's neighbourhood "
          "when the machine is otherwise idle.")

# %% [markdown]
# Two lessons carry over to real clusters: keep one rank per core (or per
# device), and distrust a latency measured on an oversubscribed machine.

# %% [markdown]
# ## 5. Reading other people's numbers
#
# A widely shared article on HCCL communication benchmarks all_reduce on 16
# NPUs and prints a bandwidth. We do not name it; the figures below are the
# ones it publishes. What is wrong with them:
#
# 1. **No synchronize.** It does warm up (ten untimed calls) and starts with
#    a barrier, but then reads `time.time()` around each call without
#    waiting for the device, so what it measures may be the time to *queue*
#    the all_reduce (section 1a). No formula repairs that: re-measure. It
#    also keeps rank 0's times only, not the slowest rank's (section 1c).
# 2. **A formula that does not match its own printout.** The code computes
#    2·S/t; the sample output's 19.2 GB/s for 5.2 ms is 10⁸ B / t, i.e.
#    S/t with "100 MB" read as 10⁸ bytes — but its code allocates
#    100·2²⁰ bytes (100 MiB).
# 3. **Mixed units.** Its Gb/s figure divides by 1000 while the code divides
#    by 1024. Pick one: nccl-tests uses GB = 10⁹ bytes (and 1 byte = 8 bits).
# 4. **No busbw factor**, and a "utilisation" that sets its bandwidth, in
#    gigabits, against the line rate of one 200 Gb/s NIC.
#
# Taking the article's buffer and time at face value (only the arithmetic
# can be checked here):

# %%
S, t, p = 100 * 2**20, 5.2e-3, 16  # the buffer its code allocates, its time per call, ranks
algbw = S / t / 1e9
busbw = algbw * bench.busbw_factor("all_reduce", p)
readings = {
    "algbw = S/t, S = 100 MiB, GB/s (right)": algbw,
    "busbw = algbw · 2(p-1)/p, GB/s (right)": busbw,
    "its printout: 10^8 B / t, GB/s": 1e8 / t / 1e9,
    "its code's 2·S/t, GB/s": 2 * S / t / 1e9,
    "S/t in GiB/s (2^30 B)": S / t / 2**30,
    "its 'Gbps' as printed (×8, ÷1000)": 1e8 / t / 1e6 * 8 / 1000,
    "its 'Gbps' as its code computes (×8, ÷1024)": 1e8 / t / 1e6 * 8 / 1024,
}
for what, value in readings.items():
    print(f"{what:>44}: {value:6.1f}")
low, high = min(readings.values()), max(readings.values())
print(f"\nthe 'same' measurement, reported anywhere from {low:.0f} to {high:.0f}")

# %% [markdown]
# That spread is why a benchmark should print exact bytes, say GB = 10⁹, and
# show algbw and busbw side by side, as nccl-tests does.
#
# **"What fraction of a 200 Gb/s NIC?"** A 200 Gb/s NIC moves 25 GB/s per
# direction. Setting a 16-rank *algbw* against it compares two different
# things: algbw is not what any link carries (busbw estimates that), and on
# two 8-NPU servers the collective does not go through one NIC — inside a
# server it runs over HCCS, and an Atlas 800T A2 server has 8 RoCE ports, one
# per NPU (Huawei's MindCluster deployment guide). Here is what the
# comparison gives:

# %%
nic = 200e9 / 8 / 1e9  # GB/s
its_gbps = readings["its 'Gbps' as printed (×8, ÷1000)"]
print(f"its 'utilisation': {its_gbps:.1f} Gb/s / 200 Gb/s = {its_gbps / 200:.1%}")
print(f"algbw / NIC = {algbw / nic:.0%},  busbw / NIC = {busbw / nic:.0%}")
if busbw > nic:
    print("-> busbw exceeds one NIC's line rate: one NIC cannot have been the bottleneck,\n"
          "   so 'percent of the NIC' says nothing about this run (or the time is not real).")
else:
    print("-> compare busbw, not algbw, with the links the collective actually crosses.")

# %% [markdown]
# **Ascend's `hccl_test`** (e.g. `all_reduce_test`, run with `mpirun`) prints
# `data_size(Bytes)`, `aveg_time(us)`, `alg_bandwidth(GB/s)` and
# `check_result`: algorithm bandwidth only. Its all_reduce `alg_bandwidth` is
# S/t, nccl-tests' algbw. For all_gather and reduce_scatter it divides
# bytes × rank_size by the time, which is again nccl-tests' algbw (S is the
# whole p-rank buffer). So in every case busbw = alg_bandwidth × the busbw
# factor:

# %%
def hccl_test_busbw(alg_bandwidth, collective, rank_size):
    """busbw (GB/s) from hccl_test's alg_bandwidth column."""
    return alg_bandwidth * bench.busbw_factor(collective, rank_size)


# an example reading, to show the arithmetic (not a measurement)
for collective in ("all_reduce", "all_gather", "reduce_scatter"):
    print(f"{collective:>14}: alg_bandwidth 10.0 on 8 ranks -> busbw "
          f"{hccl_test_busbw(10.0, collective, 8):.2f} GB/s")

# %% [markdown]
# ## 6. Taking it to a real cluster
#
# The benchmark in this notebook is the same code you run with `torchrun`.
# It joins the group from torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT), picks the backend the way the launcher does (HCCL
# on NPUs, NCCL on GPUs, gloo otherwise), prints the table on rank 0, and
# exits with status 1 if any `#wrong` is non-zero.
#
# **One server with 8 NPUs** (after `source <CANN>/set_env.sh`):
#
# ```bash
# torchrun --standalone --nproc_per_node=8 -m labsupport.runtime.bench \
#     --collective all_reduce -b 8 -e 1G -f 2 -n 20 -w 5 --json ar_1x8.json
# ```
#
# **Two servers**, 8 NPUs each: the same command on both, with the address of
# the first server and each server's number:
#
# ```bash
# # on server 0 (IP 10.0.0.1), then the same on server 1 with --node_rank=1
# torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 \
#     --master_addr=10.0.0.1 --master_port=29500 -m labsupport.runtime.bench \
#     --collective all_reduce -b 8 -e 1G -f 2 --json ar_2x8.json
# ```
#
# `--collective` takes all_reduce, all_gather, reduce_scatter, broadcast,
# reduce, all_to_all or sendrecv; `-d` the datatype (float, half, bfloat16,
# …), `-o` the reduction, `-a 3` the slowest rank's time. Without torchrun,
# `python -m labsupport.runtime.bench --nproc 4 ...` starts a local group itself.
#
# **HCCL environment variables that matter** for a benchmark (from the CANN
# documentation of HCCL's environment variables):
#
# | variable | what it does |
# |---|---|
# | `HCCL_CONNECT_TIMEOUT` | seconds to wait while ranks connect (120–7200, default 120): raise it for many nodes |
# | `HCCL_EXEC_TIMEOUT` | seconds a collective may run before HCCL gives up (default 1836 on Atlas A2/A3; other ranges apply in AIV mode and on Atlas training series) |
# | `HCCL_BUFFSIZE` | MB of buffer per communicator (default 200); large messages are cut to fit it |
# | `HCCL_ALGO` | the inter-server algorithm, e.g. `"level0:NA;level1:H-D_R"` (recursive halving-doubling) |
# | `HCCL_IF_IP`, `HCCL_SOCKET_IFNAME` | which host interface HCCL's set-up sockets use between servers |
# | `HCCL_WHITELIST_DISABLE` | turns off the connection allow-list |
# | `RANK_TABLE_FILE` | a rank table (JSON) that describes the servers and devices |
#
# Record the ones you set next to the results: the same cluster with another
# `HCCL_ALGO` is another experiment. The intra-server algorithm is not a knob:
# HCCL picks it from the hardware.
#
# **Back in the notebook**, load the JSON file and plot it with its fit. Here
# it is the all_reduce sweep saved above with `json=`; on a cluster, it is
# `ar_1x8.json`. The file keeps both nccl-tests' mean time and the median of
# the timed iterations, so both can be fitted. Which to believe? The one whose
# residual is smaller describes the run better; on a shared machine that is
# usually the median, because a few iterations that lost their core pull the
# mean up (and with it α and β). The cell computes both and says which:

# %% tags=["nbval-ignore-output"]
records = bench.load_json(results_dir / "all_reduce.json")
fits = {t: bench.fit_alpha_beta(records, in_place=True, time=t) for t in ("time_us", "median_us")}
for t, f in fits.items():
    print(f"{'mean' if t == 'time_us' else 'median':>6}: {f}")
best = min(fits, key=lambda t: fits[t].residual)
believed = "mean" if best == "time_us" else "median"
print(f"-> believe the {believed} fit: its residual is the smaller")
cluster_fit = fits[best]
fig = plot_bandwidth(records, cluster_fit, in_place=True, time=best)

# %% [markdown]
# Compare the fitted 1/β with what the hardware promises for the links the
# collective crosses, and the measured busbw at the largest sizes with 1/β.
# If busbw keeps rising at your largest size, you have not reached the
# bandwidth-bound regime yet: sweep further (`-e`).

# %%
cluster.shutdown()

# %% [markdown]
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/costmodel/fit.py` (`busbw_factor`): each collective's busbw factor, and the α-β fit.

# %% [markdown]
# ## Recap
#
# - On a device, a collective returns when it is *queued*: synchronize before
#   reading the clock. Warm up first (a new group and a fresh buffer both cost
#   extra the first time). Start all ranks together (synchronize, barrier,
#   synchronize) and report the group's time, the slowest rank's.
# - algbw = S/t; busbw = algbw × factor: 2(p−1)/p for all_reduce, (p−1)/p for
#   all_gather, reduce_scatter and all_to_all, 1 for broadcast, reduce and
#   send/recv. busbw is what you compare with a link (in-network reduction
#   can push it past the link).
# - Small messages are latency-bound, large ones bandwidth-bound; the α-β fit
#   gives both numbers and the size where they cross. Measure with one rank
#   per core or device.
# - Know what your backend runs: gloo's reduce_scatter is an all_reduce in
#   disguise, so its busbw is not NCCL's.
# - When you read someone else's bandwidth, ask: synchronized? which S? which
#   GB? algbw or busbw? compared with which link?
# - `torchrun -m labsupport.runtime.bench` gives an nccl-tests table on a real cluster;
#   `--json` brings the numbers back here.
#
# > **Common mistake: the bandwidth test that times the queue.** A widely
# > copied benchmark warms up and starts with a barrier, and then undoes it:
# > it reads the clock around each asynchronous collective without
# > synchronizing the device, keeps rank 0's time only, and prints a bandwidth
# > whose formula does not match its own output (and no busbw factor). On an
# > NPU the missing synchronize alone can turn milliseconds into microseconds. The
# > fix is the loop of Exercise 06.1: warm up; synchronize, barrier,
# > synchronize; time n calls; synchronize; take the slowest rank's time;
# > report S/t and S/t × the collective's factor, with GB = 10⁹ bytes.
#
# ## Where to go next
#
# [Notebook 04](04_algorithms.ipynb) fits the α-β model to other algorithms —
# binomial trees, recursive doubling, Rabenseifner — and finds the sizes where
# each one wins. [Notebook 07](07_overlap.ipynb) hides communication behind
# computation: what you measured here — α, β and the crossover — decides how
# big a gradient bucket must be before overlapping pays off.
