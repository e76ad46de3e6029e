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
# # 06 · Measuring bandwidth right
#
# Everybody who trains on more than one device ends up quoting a bandwidth:
# "AllReduce runs at 40 GB/s on our cluster". Half of the numbers quoted in
# blog posts and chat threads are wrong, not because the hardware misbehaved
# but because the stopwatch did. This notebook builds the stopwatch properly,
# then uses it.
#
# **You will leave this notebook able to**
# - say why `time.time()` around a collective lies (asynchronous launches, the
#   first call, one rank's clock), and what a correct benchmark does instead;
# - turn a time into *algbw* and *busbw*, derive the busbw factor of each
#   collective, and explain why busbw is the number to compare with a link;
# - sweep message sizes, read the latency-bound and bandwidth-bound regimes on
#   a log-log plot, and fit the α-β model to your own measurements;
# - correct a published benchmark, and convert Ascend `hccl_test` output to busbw;
# - run the same benchmark with `torchrun` on an 8-NPU server or two.
#
# The tool is `labsupport.bench`, which speaks nccl-tests' options and prints
# nccl-tests' table, so your numbers can sit next to anyone else's.

# %%
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import bench
from labsupport.viz.bandwidth import plot_bandwidth

# %load_ext labsupport

# %% [markdown]
# One group of 4 ranks for most of the notebook (`%%ranks` cells use it too):

# %% tags=["nbval-ignore-output"]
cluster = lab.Cluster(world_size=4)
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
# The cell below times one 16 MB all_reduce twice on every rank: when the call
# returns, and after synchronizing. On this CPU with gloo the two agree: gloo's
# calls only return when the work is done. Run the same cell on an NPU or GPU
# (it uses each rank's `device`) and the first number collapses to the
# launch time.

# %% tags=["nbval-ignore-output"]
# %%ranks --show 0,1
import time

from labsupport import bench

x = torch.ones(4 * 2**20, device=device)  # 16 MB of float32
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
# Here is each of the first ten calls on a fresh 4 MB buffer, as measured on
# this machine. On a CPU the first call may stand out only a little (gloo
# connects its ranks when the group is created); on a device it is usually
# far slower than the rest. Measure it where you run.

# %% tags=["nbval-ignore-output"]
# %%ranks --show 0
y = torch.ones(2**20, device=device)
times = []
for _ in range(10):
    bench.synchronize(device)
    start = time.perf_counter()
    dist.all_reduce(y)
    bench.synchronize(device)
    times.append((time.perf_counter() - start) * 1e6)
print("first ten calls (us):", [round(t) for t in times])
print(f"first / median of the rest: {times[0] / sorted(times[1:])[4]:.2f}")

# %% [markdown]
# ### 1c. One rank's clock is not the group's
#
# A collective finishes on a rank only when every rank has joined in. If one
# rank arrives late (it had more work, a slower data loader, a page fault),
# the others *wait inside the collective*, and their timers count the wait as
# communication. Below, rank 0 arrives 20 ms late. Rank 0's own timer sees a
# fast all_reduce; everybody else sees the all_reduce plus rank 0's delay.

# %% tags=["nbval-ignore-output"]
def time_with_a_late_rank(delay_s=0.02):
    x = torch.ones(1024)
    dist.all_reduce(x)
    if dist.get_rank() == 0:
        time.sleep(delay_s)  # rank 0 is busy elsewhere
    start = time.perf_counter()
    dist.all_reduce(x)
    return (time.perf_counter() - start) * 1e3


late = cluster.run(time_with_a_late_rank)
for rank, ms in enumerate(late):
    print(f"rank {rank}: all_reduce took {ms:6.2f} ms by its own clock")

# %% [markdown]
# Two lessons. Start every timed loop *together*: synchronize the device,
# barrier, synchronize again, then start the clock. And report a time for the
# *group*: nccl-tests averages over ranks by default (`-a 1`) and offers rank
# 0's time (`-a 0`), the minimum (`-a 2`) and the maximum (`-a 3`), which is
# the time the slowest rank saw. `labsupport.bench` does all of this:
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
# conventions, `doc/PERFORMANCE.md`; GB = 10⁹ bytes):
#
# - **algbw = S / t**, where S is the data size of the call (for all_gather,
#   reduce_scatter and all_to_all, the whole n-rank buffer);
# - **busbw = algbw × factor**, a factor that depends on the collective and
#   on n, chosen so that busbw can be compared with the bandwidth of one link.
#
# Where the all_reduce factor comes from: in notebook 03 you derived the ring
# all_reduce and proved that each rank sends 2(n−1) chunks of S/n bytes — a
# reduce-scatter phase of n−1 steps and an all-gather phase of n−1 steps. So
# every rank's link carries 2(n−1)/n · S bytes, and if a link moves B bytes
# per second,
#
# $$ t \;\ge\; \frac{2(n-1)}{n}\cdot\frac{S}{B}
# \quad\Longleftrightarrow\quad
# B \;\ge\; \frac{S}{t}\cdot\frac{2(n-1)}{n} \;=\; \text{busbw}. $$
#
# No algorithm can do better: every element must leave each rank once (its
# contribution) and arrive once (the result), which is what the ring achieves.
# So busbw close to the link's bandwidth means the collective uses the
# hardware fully, *whatever the algorithm and the number of ranks*; algbw, by
# contrast, falls as n grows even on perfect hardware.
#
# The cost model of notebook 04 counts the same bytes from the ring's schedule:

# %%
from labsupport import costmodel, schedules

n, S = 4, 1_000_000
sent = costmodel.cost(schedules.ring_all_reduce(n), S).sent_per_rank
print(f"ring all_reduce of {S:,} bytes on {n} ranks: each rank sends {sent[0]:,.0f} bytes")
print(f"2(n-1)/n · S = {2 * (n - 1) / n * S:,.0f}")

# %% [markdown]
# ### Exercise 06.1: the busbw factor of every collective
#
# Write `busbw_factor(collective, n)` for `"all_reduce"`, `"all_gather"`,
# `"reduce_scatter"`, `"all_to_all"`, `"broadcast"`, `"reduce"` and
# `"sendrecv"`. Reason the way we did for all_reduce: how many bytes must
# cross each rank's link, as a fraction of S?
#
# - all_gather: S is the whole gathered buffer, and each rank already holds
#   its own 1/n of it.
# - reduce_scatter: S is the whole input; each rank ends with one piece.
# - all_to_all: S is the whole buffer; the piece a rank keeps for itself
#   never travels.
# - broadcast and reduce: a pipelined chain moves every byte over each link
#   once.
# - sendrecv: one buffer over one link.

# %%
# Exercise 06.1: the busbw factor of each collective
def busbw_factor(collective, n):
    # BEGIN SOLUTION
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # broadcast, reduce, sendrecv
    # END SOLUTION


# %%
from labsupport.checks.bandwidth import check_busbw_factors

check_busbw_factors(busbw_factor)

# %% [markdown]
# From here on the notebook uses `bench.busbw_factor`, the benchmark's own.

# %% [markdown]
# ## 3. A first benchmark
#
# `bench.benchmark(cluster, collective, ...)` runs on the cluster's ranks and
# prints nccl-tests' table: for each size, the time, algbw, busbw and `#wrong`
# out-of-place (separate input and output buffers) and in-place (one buffer).
# torch's all_reduce is always in place, so the out-of-place column times a
# copy of the input plus the in-place call — what keeping your input costs in
# torch. The options have nccl-tests' names: `minbytes` (-b), `maxbytes`
# (-e), `stepfactor` (-f), `iters` (-n), `warmup_iters` (-w), `average` (-a).

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
       title="all_reduce, 4 ranks: each timed iteration")  # fmt: skip
fig.tight_layout()

# %% [markdown]
# A wide box, or a mean far from the median, says the machine was busy or the
# run too short: more iterations (`-n`) help, and so does an idle machine. On
# a laptop shared with a browser, expect boxes.

# %% [markdown]
# ## 4. Sweeping sizes: latency-bound and bandwidth-bound
#
# A collective costs a fixed latency per message (α) plus a time per byte (β).
# The α-β model of notebook 04 says, for ring all_reduce on p ranks,
#
# $$ t(S) = 2(p-1)\,\alpha \;+\; \frac{2(p-1)}{p}\,S\,\beta . $$
#
# Small messages are **latency-bound**: t barely changes with S, so busbw
# grows in proportion to S. Large ones are **bandwidth-bound**: t grows with
# S, and busbw flattens out towards 1/β. The two terms are equal at the
# crossover size S* = p·α/β. Let us measure both regimes with 2 and 4 ranks.
# The default sweep is small enough for CI; set `BIG_SWEEP = True` for a
# longer one that shows the bandwidth-bound regime more clearly.

# %%
BIG_SWEEP = False
SWEEP = dict(
    minbytes="1K", maxbytes="64M" if BIG_SWEEP else "4M", stepfactor=4,
    iters=20 if BIG_SWEEP else 10, warmup_iters=3,
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
results_dir = Path(tempfile.mkdtemp(prefix="bench-"))
four = bench.benchmark(cluster, "all_reduce", as_frame=False, json=str(results_dir / "p4.json"),
                       **SWEEP)  # fmt: skip

# %% tags=["nbval-ignore-output"]
with lab.Cluster(world_size=2) as pair:
    two = bench.benchmark(pair, "all_reduce", as_frame=False, **SWEEP)

# %% [markdown]
# Fit α and β to both world sizes at once (the same α and β, the model's
# p-dependence doing the rest), and read off the crossover. The fit weighs
# each point by its relative error, so that the microsecond points count as
# much as the millisecond ones; the RMS residual says how well the straight
# α-β story describes this machine.
#
# We fit the *median* of the timed iterations (`time="median_us"`) rather
# than nccl-tests' mean: on a shared machine a few iterations that lost their
# core to another process pull the mean up, and the median ignores them.

# %% tags=["nbval-ignore-output"]
fit = bench.fit_alpha_beta(two + four, time="median_us")
print(fit)
for p in (2, 4):
    print(f"{p} ranks: latency and bandwidth terms are equal at S* = {fit.crossover(p):,.0f} bytes")

# %% tags=["nbval-ignore-output"]
fig = plot_bandwidth(two + four, fit, time="median_us")

# %% [markdown]
# Read the plot from left to right. At the small sizes the time is nearly
# flat: each call pays the latencies and hardly any bytes, and busbw climbs
# with S. Past the crossover (dotted line) time grows with S and busbw bends
# towards its ceiling. On this CPU the "links" are loopback sockets and memory
# copies shared by ranks that take turns on a couple of cores, so α is large
# and the fit is rough. On an NPU server, α is microseconds and 1/β is the
# HCCS or RoCE link.
#
# The fitted α is per message: the 2(p−1) messages of the ring are part of the
# model. That is why one α and one β can describe both world sizes, and why a
# 4-rank all_reduce has a larger fixed cost than a 2-rank one.

# %% [markdown]
# ### When there are more ranks than cores
#
# The model says the fixed cost grows like 2(p−1): going from 2 to 4 ranks
# should multiply the small-message time by 6/2 = 3. Compare with what this
# machine measured at the smallest size:

# %% tags=["nbval-ignore-output"]
import os

smallest = min(r["size"] for r in two)
t_small = {
    r["nranks"]: r["median_us"]
    for r in two + four
    if r["size"] == smallest and not r["in_place"]
}
print(f"CPU cores: {os.cpu_count()}")
print(f"{smallest} B all_reduce: {t_small[2]:.0f} us on 2 ranks, {t_small[4]:.0f} us on 4 ranks")
print(f"measured ratio {t_small[4] / t_small[2]:.1f}x, the alpha-beta model predicts 3.0x")

# %% [markdown]
# With at least one core per rank, the measured ratio should be in the
# model's neighbourhood. With more ranks than cores (4 ranks on the course's
# 2-core CI machine, say) expect it to be far larger: each message now also
# waits for the receiving rank to get a core from the operating system's
# scheduler, so "α" measures the scheduler, not the link.
# Two lessons carry over to real clusters: keep one rank per core (or per
# device), and distrust a latency measured on an oversubscribed machine.

# %% [markdown]
# ## 5. Reading other people's numbers
#
# A widely shared article on HCCL communication benchmarks all_reduce on 16
# NPUs and prints a bandwidth. We do not name it; its figures below are as
# published. What is wrong with them:
#
# 1. **No synchronize.** It reads `time.time()` around each call without
#    waiting for the device, so what it measures may be the time to *queue*
#    the all_reduce (section 1a). No formula repairs that: re-measure.
# 2. **A formula that does not match its own printout.** The code computes
#    2·S/t; the sample output shows 100 MB in 5.2 ms as 19.2 GB/s, which is
#    S/t.
# 3. **Mixed units.** Its Gb/s figure divides by 1000 while the code divides
#    by 1024. Pick one: nccl-tests uses GB = 10⁹ bytes (and 1 byte = 8 bits).
# 4. **No busbw factor.** For 16 ranks, busbw = algbw × 2·15/16.
#
# Taking the article's size and time at face value (only the arithmetic can
# be checked here):

# %%
S, t, n = 100e6, 5.2e-3, 16  # the article's buffer, time per call, ranks
algbw = S / t / 1e9
print(f"algbw = S/t                 = {algbw:6.1f} GB/s   (what its output shows)")
print(f"2·S/t, as its code computes = {2 * S / t / 1e9:6.1f} GB/s   (not algbw, not busbw)")
print(f"busbw = algbw · 2(n-1)/n    = {algbw * bench.busbw_factor('all_reduce', n):6.1f} GB/s")
print(f"if '100 MB' meant 100·2^20 B: algbw = {100 * 2**20 / t / 1e9:6.1f} GB/s")
print(f"S/t in GiB/s (divide by 2^30)   = {S / t / 2**30:6.1f} GiB/s")
print(f"in gigabits (×8, 10^9)          = {8 * algbw:6.1f} Gb/s")

# %% [markdown]
# Between the wrong factor of 2 and the units, the "same" measurement can be
# reported anywhere between about 18 and 154 — which is why a benchmark
# should print exact bytes, say GB = 10⁹, and show algbw and busbw side by
# side, as nccl-tests does.
#
# **Ascend's `hccl_test`** (e.g. `all_reduce_test`, run with `mpirun`) prints
# `data_size(Bytes)`, `aveg_time(us)`, `alg_bandwidth(GB/s)` and
# `check_result`: algorithm bandwidth only. Its all_reduce `alg_bandwidth` is
# S/t, nccl-tests' algbw. For all_gather and reduce_scatter it divides
# bytes × rank_size by the time, which is again nccl-tests' algbw (S is the
# whole n-rank buffer). So in every case busbw = alg_bandwidth × the busbw
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
# torchrun --standalone --nproc_per_node=8 -m labsupport.bench \
#     --collective all_reduce -b 8 -e 1G -f 2 -n 20 -w 5 --json ar_1x8.json
# ```
#
# **Two servers**, 8 NPUs each: the same command on both, with the address of
# the first server and each server's number:
#
# ```bash
# # on server 0 (IP 10.0.0.1), then the same on server 1 with --node_rank=1
# torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 \
#     --master_addr=10.0.0.1 --master_port=29500 -m labsupport.bench \
#     --collective all_reduce -b 8 -e 1G -f 2 --json ar_2x8.json
# ```
#
# `--collective` takes all_reduce, all_gather, reduce_scatter, broadcast,
# reduce, all_to_all or sendrecv; `-d` the datatype (float, half, bfloat16,
# …), `-o` the reduction, `-a 3` the slowest rank's time. Without torchrun,
# `python -m labsupport.bench --nproc 4 ...` starts a local group itself.
#
# **HCCL environment variables that matter** for a benchmark (from the CANN
# documentation of HCCL's environment variables):
#
# | variable | what it does |
# |---|---|
# | `HCCL_CONNECT_TIMEOUT` | seconds to wait while ranks connect (120–7200, default 120): raise it for many nodes |
# | `HCCL_EXEC_TIMEOUT` | seconds a collective may run before HCCL gives up (default 1836) |
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
# it is the 4-rank sweep saved above with `json=`; on a cluster, it is
# `ar_1x8.json`:

# %% tags=["nbval-ignore-output"]
records = bench.load_json(results_dir / "p4.json")
cluster_fit = bench.fit_alpha_beta(records)
print(cluster_fit)
fig = plot_bandwidth(records, cluster_fit)

# %% [markdown]
# Compare the fitted 1/β with what the hardware promises for the links the
# collective crosses, and the measured busbw at the largest sizes with 1/β.
# If busbw keeps rising at your largest size, you have not reached the
# bandwidth-bound regime yet: sweep further (`-e`).

# %%
cluster.shutdown()

# %% [markdown]
# ## Recap
#
# - On a device, a collective returns when it is *queued*: synchronize before
#   reading the clock. Warm up first. Start all ranks together (synchronize,
#   barrier, synchronize) and report the group's time, not one rank's.
# - algbw = S/t; busbw = algbw × factor: 2(n−1)/n for all_reduce, (n−1)/n for
#   all_gather, reduce_scatter and all_to_all, 1 for broadcast, reduce and
#   send/recv. busbw is what you compare with a link.
# - Small messages are latency-bound, large ones bandwidth-bound; the α-β fit
#   gives both numbers and the size where they cross.
# - When you read someone else's bandwidth, ask: synchronized? which S? which
#   GB? algbw or busbw?
# - `torchrun -m labsupport.bench` gives an nccl-tests table on a real cluster;
#   `--json` brings the numbers back here.
#
# ## Where to go next
#
# Notebook 07 hides communication behind computation. What you measured here
# — α, β and the crossover — is what decides how big a gradient bucket must be
# before overlapping pays off.
