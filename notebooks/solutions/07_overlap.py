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
# # 07 · Overlapping communication with computation
#
# Data-parallel training all-reduces every gradient at every step. Done after
# the backward pass, that time simply adds up. But backward produces the last
# layer's gradients first: they can travel while the earlier layers are still
# being differentiated. This notebook builds data-parallel training by hand,
# from the naive version to the one torch's `DistributedDataParallel` (DDP)
# uses, **in torch's own shape** (an `nn.Module` wrapper: wrap the model, call
# `loss.backward()`, and the gradients are averaged when it returns), and
# *looks* at where the time goes, rank by rank.
#
# **You will leave this notebook able to**
# - use asynchronous handles: `async_op=True`, `isend`/`irecv`, `Work.wait()`,
#   futures, and say what a future's completion means on gloo and on NCCL/HCCL;
# - write data-parallel training by hand: naive, flat, overlapped with
#   gradient hooks, bucketed with torch's bucket rule, buckets sent in order;
# - read per-rank timelines of compute and communication, and know what a
#   collective's span on one rank does and does not mean;
# - predict from the α-β model and the backward time how much overlap can hide,
#   with its two bounds, and check it against a bucket-size sweep;
# - say what torch's DDP does the same way and what it adds, tell DDP's overlap
#   from pipeline parallelism's 1F1B schedule, and what ZeRO changes in traffic.
#
# The exercises are **Exercise 07.1** (the overlapped version) and **Exercise
# 07.2** (the bucketed version). Sources are in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding).

# %%
import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import ddp, netem
from labsupport.runtime import capstone, emulator, trace
from labsupport.runtime.bench.timing import time_iterations
from labsupport.runtime.check.ddp_judge import describe
from labsupport.runtime.check.overlap import check_bucketed, check_overlapped
from labsupport.runtime.experiments import ddp_runs, workload
from labsupport.runtime.viz.ddp import bucket_slider, plot_bucket_choice

# %load_ext labsupport

# %% [markdown]
# Sizes are small so that the whole notebook runs in about a minute on a
# laptop. `FULL_SWEEP = True` measures more bucket sizes and more steps (a few
# minutes).

# %%
RANKS = 4
FULL_SWEEP = False  # True: the bucket-size sweep with more sizes and steps
STEPS = 6 if FULL_SWEEP else 3
CHECK = workload.Config(in_features=64, hidden=128, layers=4, out_features=16, batch=64,
                   dtype=torch.float64)  # the model the correctness checks train
print(f"model: {CHECK.layers} linear layers, {CHECK.param_count():,} parameters; "
      f"global batch {CHECK.batch} ({CHECK.batch // RANKS} rows per rank)")

# %% [markdown]
# The ranks start on an emulated network (`labsupport.netem`, notebook 04) that
# is nearly free for now; later sections slow it down. On an emulated network
# each rank computes on one thread (`ddp_runs.use_threads`): the emulated clock
# charges the CPU time of the thread that runs your code, and more threads than
# cores would make the ranks fight for the cores.

# %% tags=["nbval-ignore-output"]
FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
cluster = lab.Cluster(RANKS, network=FAST)
print("threads per rank:", cluster.run(ddp_runs.use_threads)[0])

# %% [markdown]
# ## 1. Asynchronous handles
#
# Every collective takes `async_op=True`. It then returns at once with a
# **Work** handle, while the operation proceeds in the background; the tensor
# holds the result only after `work.wait()` returns. In between, the rank is
# free to compute, as long as it does not touch that tensor.
#
# The compute in this notebook is **emulated**: `workload.emulate_compute(seconds)`
# (`emulator.compute`) stands for an accelerator's kernels. On the emulated
# network it moves the rank's clock by exactly that much without running
# anything, so the same model takes the same time on every laptop; and, as on
# an NPU or a GPU, whose host thread only launches kernels, the rank is free to
# issue and wait for collectives while the "device" computes. (What emulation
# hides: on a GPU, NCCL's collectives are kernels too, that take SMs and memory
# bandwidth from the compute they overlap with, so overlapped compute runs a
# little slower there; emulated compute does not.) The network is emulated too
# (notebook 04): the times below are those of its links, on any laptop, busy or
# quiet; the data and the results are real.
#
# Below, on a slow network: a 4 MiB all-reduce alone; then compute as long as
# that all-reduce, followed by the all-reduce; then the same all-reduce issued
# first and the compute done while it is in flight. Each is timed the way
# notebook 06 taught (`labsupport.runtime.bench.timing.time_iterations`: warm-up,
# barrier, the slowest rank).
#
# **Predict, then run.** Call the all-reduce's time T; the compute takes T too.
# About how long do "compute, then all-reduce" and "all-reduce in flight while
# computing" take?

# %%
def blocking_then_async(nbytes=4 << 20):
    """On every rank: seconds (slowest rank) of the all-reduce alone, in sequence, overlapped."""
    x = torch.ones(nbytes // 4)
    alone = time_iterations(lambda i: dist.all_reduce(x), 2).median
    compute = alone  # emulated compute as long as the all-reduce

    def in_sequence(i):
        workload.emulate_compute(compute)
        dist.all_reduce(x)

    def overlapped(i):
        work = dist.all_reduce(x, async_op=True)  # returns at once
        workload.emulate_compute(compute)  # runs while the all-reduce is in flight
        work.wait()  # only now is x reduced

    return [alone, time_iterations(in_sequence, 2).median, time_iterations(overlapped, 2).median]


SLOW = netem.Network(inter=netem.Link(latency=200e-6, bandwidth=100e6), ranks_per_node=1)
_ = cluster.run(emulator.set_network, SLOW)
alone, in_sequence, overlapped = cluster.run(blocking_then_async)[0]
_ = cluster.run(emulator.set_network, FAST)

# %% tags=["nbval-ignore-output"]
print(f"all_reduce alone:                     {alone * 1e3:6.1f} ms (compute takes as long)")
print(f"compute, then all_reduce:             {in_sequence * 1e3:6.1f} ms")
print(f"all_reduce in flight while computing: {overlapped * 1e3:6.1f} ms")
print(f"Issuing first and waiting later took {overlapped / in_sequence:.2f}x the time of doing "
      "one after the other;")
print(f"the floor is max(compute, all-reduce), {alone / in_sequence:.2f}x.")

# %% [markdown]
# <details><summary>Answer</summary>
#
# In sequence the two add up: about 2T. In flight together the step is the
# longer of the two, max(T, T) = T: about half. Nothing can beat that floor;
# overlap hides the shorter of compute and communication, never both.
# </details>

# %% [markdown]
# A Work also has a **future** (`work.get_future()`, a `torch.futures.Future`):
# `then(callback)` runs the callback when the future completes, on one of the
# backend's threads, whether or not anybody waits. What "completes" means
# depends on the backend. On **gloo** (here) the future completes when the
# operation has finished. On **NCCL** (and HCCL, which follows it) it completes
# once later work on the device is ordered after the collective, not when the
# device has finished it (torch's `Work.get_future` documentation: "fut.wait()
# … does not wait for the entire operation to complete on GPU"). So a timeline
# built from futures (as `labsupport.runtime.trace` builds them) shows, on a device,
# when work was *queued*; for device time use `torch.profiler`, whose traces
# `labsupport.runtime.trace.from_profiler` reads.
#
# Point-to-point has the same shape: `isend`/`irecv` return handles (on gloo
# without a future). A ring shift, everyone sending right and receiving from
# the left, without deadlock because nobody blocks before both are posted:

# %% tags=["nbval-ignore-output"]
# %%ranks
rank, p = dist.get_rank(), dist.get_world_size()
send, recv = torch.full((2,), float(rank)), torch.empty(2)
handles = [dist.isend(send, (rank + 1) % p), dist.irecv(recv, (rank - 1) % p)]
for h in handles:
    h.wait()  # recv is filled only after this

x = torch.ones(4)
fut = dist.all_reduce(x, async_op=True).get_future()
doubled = fut.then(lambda f: f.value()[0] * 2)  # runs when the all-reduce is done
print(f"received {recv.tolist()} from rank {(rank - 1) % p}; all_reduce then ×2 =",
      doubled.wait().tolist())

# %% [markdown]
# ## 2. Data parallelism as torch does it, checked against one process
#
# Every rank holds the whole model and a slice of the global batch. Each
# computes gradients on its slice; averaging them over the ranks gives exactly
# the gradient of the mean loss over the whole batch. So every version below
# must give the **same gradients, optimizer state and weights as one process**
# training on the global batch, up to float rounding. `labsupport.ddp` has the
# model (an MLP), the synthetic data from fixed seeds and that baseline
# (`CHECK.baseline`). The checks run in float64, where rounding is about 1e-13,
# so they can be tight.
#
# A version is used exactly as `torch.nn.parallel.DistributedDataParallel`:

# %%
print(inspect.getsource(ddp_runs.train_step))

# %% [markdown]
# Every version shares its plumbing with torch's DDP, in `ddp.DDPBase`:
#
# - **at construction** it broadcasts every parameter (frozen ones too) and every
#   buffer from rank 0: each rank here builds its model from a seed of its own,
#   as a program that does not seed its ranks alike would;
# - it registers a hook on every trainable parameter,
#   `register_post_accumulate_grad_hook`, which autograd calls once the
#   parameter's `.grad` is complete. The hook's argument is **the parameter**,
#   not the gradient: all-reducing the argument would average the *weights*;
# - the first hook of a backward queues a callback with the autograd engine
#   (`queue_callback`, as picotron does; torch's Reducer queues its own once
#   the last bucket has been launched, in `Reducer::mark_variable_ready`): it
#   runs when backward's computation is done and waits for the gradients, so
#   `loss.backward()` returns with them averaged;
# - a trainable parameter that forward never used is an error (its gradient
#   never comes, so a bucket holding it never fills), unless
#   `find_unused_parameters=True`. The course's wrapper raises it when backward
#   ends and names the parameter; torch's DDP raises it at the *next* forward
#   and names the parameters' indices (their names too only with
#   `TORCH_DISTRIBUTED_DEBUG=INFO` or `DETAIL`). `no_sync()` skips the
#   communication for gradient accumulation.
#
# A version writes only the core: `grad_ready(param)` (called from the hook),
# `wait_for_gradients()` (called at the end of backward) and
# `prepare_for_backward()` (to reset its state when a backward begins):

# %%
print(inspect.getsource(ddp.DDPBase._on_grad))

# %% [markdown]
# **Naive**: at the end of backward, one blocking all-reduce per parameter
# (divide by the world size first: the sum of the ranks' `g/p` is their mean).
# **Flat**: one all-reduce of every gradient copied into one buffer: one α
# instead of one per tensor, but still nothing overlaps.

# %%
class Naive(ddp.DDPBase):
    def wait_for_gradients(self):
        for p in self.params:
            p.grad.div_(self.world_size)
            dist.all_reduce(p.grad)


class Flat(ddp.DDPBase):
    def wait_for_gradients(self):
        grads = [p.grad for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(self.world_size)
        dist.all_reduce(flat)
        for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(part.view_as(g))


def same_as_one_process(version, steps=3, **kwargs):
    """Train `steps` steps next to one process; print where they first differ, if they do."""
    found = capstone.first_divergence(
        cluster.run(capstone.compare_steps, version, CHECK, steps, **kwargs))
    name = getattr(version, "__name__", str(version))
    print(f"{name}: the same as one process at every step" if found is None
          else f"{name}: {describe(found, RANKS, steps)}")
    return found is None


for version in (Naive, Flat):
    same_as_one_process(version)

# %% [markdown]
# ## 3. Overlap: all-reduce each gradient as soon as it is ready
#
# Issue the all-reduce of `param.grad` from the hook, with `async_op=True`,
# keep the handle, and wait for all of them at the end of backward, before the
# optimizer step.
#
# **Exercise 07.1.** Complete `grad_ready` and `wait_for_gradients`. The grader
# trains a small, awkward model with it on every rank (a weight used twice, a
# frozen layer, a buffer, an unused parameter, gradient accumulation) and
# compares with one process element by element. Then it judges the overlap
# **by time**, on a clock it owns: its own emulated network (2 ms per message),
# 2 ms of emulated compute in each layer's backward, and your hooks' CPU time
# not counted, so the verdict is the same on every laptop. Each all-reduce must
# leave within 0.5 ms of its gradient being ready, and no hook may stand still:
# an all-reduce waited for inside the hook (through the Work, its future, or
# `async_op=False`) or every all-reduce sent from backward's last gradient
# hides nothing, and fails with the times the grader saw. What it cannot see:
# work your hook hands to a thread of its own.

# %%
# Exercise 07.1: the overlapped version, with gradient hooks
class MyOverlapped(ddp.DDPBase):
    def prepare_for_backward(self):
        """A synchronizing backward begins: no handles yet."""
        self.handles = []

    def grad_ready(self, param):
        """Called from param's hook during backward, once param.grad is complete."""
        # BEGIN SOLUTION
        param.grad.div_(self.world_size)
        self.handles.append(dist.all_reduce(param.grad, async_op=True))
        # END SOLUTION

    def wait_for_gradients(self):
        """Backward is done: when this returns, every param.grad holds the mean."""
        # BEGIN SOLUTION
        for work in self.handles:
            work.wait()
        # END SOLUTION


# %%
check_overlapped(MyOverlapped, cluster)

# %% [markdown]
# ### Buckets, by torch's rule
#
# One all-reduce per parameter pays α per tensor; one flat all-reduce cannot
# start before the last gradient exists. **Buckets** sit in between. torch's
# rule (`bucket_cap_mb`, in **MiB**): walk the gradients in the order backward
# produces them (the reverse of the parameters' order); a bucket **closes once
# it holds at least** `bucket_cap_mb`, the tensor that crosses the cap
# included, so a cap is not a maximum and a tensor bigger than the cap gets a
# bucket of its own. `bucket_cap_mb=None` means torch's default, 25 MiB, with a
# smaller first bucket of 1 MiB; a cap you choose applies to every bucket.
# Where that 1 MiB bucket sits depends on `find_unused_parameters`
# (`_ddp_init_helper` in `torch/nn/parallel/distributed.py`). With `False`, the
# default, the first step runs one bucket of everything, and then torch rebuilds
# its buckets in the order the gradients arrived, the 1 MiB one first: the first
# gradients leave early. That is the rule modelled here. With `True`, torch
# buckets once, over the parameters in registration order reversed, and never
# rebuilds: the 1 MiB bucket holds the first-registered parameters, whose
# gradients come *last*, so that little is left to send when backward ends
# (torch's comment there says so). `ddp.ONE_BUCKET` asks for one bucket.
# The gradients of `workload.Config()`'s default model, in the order backward
# produces them:

# %%
sizes = [p.numel() * 4 for p in workload.Config().make_model().parameters()][::-1]
print("float32 gradient sizes, in the order backward produces them (bytes):")
print(sizes)

# %% [markdown]
# **Predict, then run.** With `bucket_cap_mb = 0.25` (262,144 bytes), which
# gradients (by index, 0 first) share a bucket? And with the default, `None`
# (a 1 MiB first bucket, then 25 MiB)?
#
# `ddp.assign_buckets` is the rule, and torch's own function agrees:

# %%
for cap in (0.25, 1.0, None, ddp.ONE_BUCKET):
    print(f"bucket_cap_mb = {cap!s:>4}: buckets {ddp.assign_buckets(sizes, cap)}")
first, cap = ddp.bucket_caps(None)
torchs, _ = dist._compute_bucket_assignment_by_size(
    [torch.empty(n // 4) for n in sizes], [int(first), int(cap)])
print("torch's _compute_bucket_assignment_by_size for the default:", torchs,
      "(the same)" if torchs == ddp.assign_buckets(sizes, None) else "(DIFFERENT)")

# %% [markdown]
# <details><summary>Answer</summary>
#
# 0.25 MiB: the first bucket collects 64 + 32,768 + 2,048 bytes and closes only
# when the 1 MiB gradient (index 3) crosses the cap: `[0, 1, 2, 3]`; then
# `[4, 5]` and `[6, 7]`, each closed by a gradient bigger than the cap. A cap
# is not a maximum. The default: the same first bucket (1 MiB is reached by
# index 3 too), then everything else, far below 25 MiB, in one: `[4, 5, 6, 7]`.
# </details>

# %% [markdown]
# **Buckets leave in bucket order.** A bucket's all-reduce starts once it is
# complete *and* every bucket before it has been sent: torch's Reducer does
# exactly this (`mark_bucket_ready`: "Buckets are reduced in sequence"). Why
# not send each bucket as soon as it is full? Gradients do not always arrive
# in the buckets' order (a parameter registered first can be used last; a
# model can branch differently from step to step), and if two ranks issue
# their all-reduces in different orders, the k-th all-reduce on one rank
# meets a different bucket on the other: wrong sums or a hang (torch's DDP
# notes say the same).
#
# **Exercise 07.2.** Complete `grad_ready` (count the gradient; send every
# complete bucket whose turn it is: copy its gradients into one flat buffer,
# divide, start its all-reduce asynchronously) and `wait_for_gradients` (wait
# for every bucket and copy its averages back into `param.grad`). The grader
# checks the numbers as before, for three caps (one smaller than every
# tensor), then the time of each step's all-reduces on its clock: one per
# bucket, in bucket order, each issued within 0.5 ms of the moment it could
# leave (its gradients ready, the bucket before it sent), and no hook standing
# still. Its model uses a bias that is registered first and used last, so its
# gradient is ready first and belongs to the last bucket.

# %%
# Exercise 07.2: the bucketed version
class MyBucketed(ddp.DDPBase):
    def __init__(self, module, bucket_cap_mb=None, **kwargs):
        super().__init__(module, **kwargs)  # broadcast, hooks, no_sync, unused parameters
        self.buckets = ddp.param_buckets(self.params, bucket_cap_mb)  # reverse order, torch's rule
        self.bucket_of = {id(p): k for k, b in enumerate(self.buckets) for p in b}

    def prepare_for_backward(self):
        self.missing = [len(b) for b in self.buckets]  # gradients not ready yet, per bucket
        self.next_bucket = 0  # the next bucket to send: they leave in order
        self.in_flight = []  # (work, flat buffer, the bucket's parameters)

    def grad_ready(self, param):
        """param.grad is complete: count it, and send every complete bucket whose turn it is."""
        # BEGIN SOLUTION
        self.missing[self.bucket_of[id(param)]] -= 1
        while self.next_bucket < len(self.buckets) and self.missing[self.next_bucket] == 0:
            bucket = self.buckets[self.next_bucket]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).div_(self.world_size)
            self.in_flight.append((dist.all_reduce(flat, async_op=True), flat, bucket))
            self.next_bucket += 1
        # END SOLUTION

    def wait_for_gradients(self):
        """Wait for every bucket, and copy its averages back into param.grad."""
        # BEGIN SOLUTION
        for work, flat, bucket in self.in_flight:
            work.wait()
            for p, part in zip(bucket, flat.split([p.numel() for p in bucket]), strict=True):
                p.grad.copy_(part.view_as(p.grad))
        # END SOLUTION


# %%
check_bucketed(MyBucketed, cluster)

# %% [markdown]
# ## 4. Timelines on a network where communication matters
#
# On a fast network the all-reduces are nearly free and overlap has nothing to
# hide. So first measure this model's compute (forward, backward, optimizer,
# on all ranks at once, no communication), then choose an emulated network on
# which one all-reduce of all gradients takes about 80 % of the backward pass:
# one NIC per rank, 200 µs per message, and the bandwidth that makes it so
# (`ddp.network_for`). The model's compute is emulated (`compute_ms`: each
# layer emulates that long divided by the layers in forward, twice as long in
# backward); a small batch keeps the real arithmetic small, and the gradients
# are exactly those without emulation.

# %%
TIMED = workload.Config(in_features=256, hidden=384, layers=6, out_features=16, batch=16,
                   compute_ms=30)
print(f"timed model: {TIMED.param_bytes() / 1e6:.2f} MB of parameters; "
      f"{TIMED.compute_ms:.0f} ms of emulated forward, {2 * TIMED.compute_ms:.0f} ms of backward")

# %% tags=["nbval-ignore-output"]
compute = cluster.run(ddp_runs.time_compute, TIMED, 5, 2)[0]
NET = ddp.network_for(compute["backward"], TIMED.param_bytes(), RANKS, latency=200e-6, ratio=0.8)
_ = cluster.run(emulator.set_network, NET)
ALPHA, BETA = NET.inter.alpha, NET.inter.beta
print("compute per step: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in compute.items()))
print(f"network: {NET}")

# %% [markdown]
# Naive, overlapped, and bucketed with 0.25 MiB buckets, 3 steps each (the
# library's copies of the classes above). One row per rank and lane. Every
# collective the version calls through `torch.distributed` is recorded
# (`trace.collectives`, without changing the version's code); the comm lane
# gets another row whenever one more all-reduce is in flight at once. A span
# runs from the call to completion, so it includes the time an all-reduce
# waits in the queue behind the ones issued before it: the staircase in the
# overlapped picture is that queue. `backward` is the whole `loss.backward()`
# call; the grey `wait` under its end is the part of it spent waiting for the
# last all-reduces, after backward's computation was done.
#
# **Predict, then run.** This model has 12 tensors; with 0.25 MiB buckets it
# has 5 buckets. Which of the three has the shortest step, which the longest,
# and what does the overlapped version pay that the bucketed one pays less
# often?

# %% tags=["nbval-ignore-output"]
BUCKET = 0.25  # MiB
SHOW_RANKS = (0, 1)  # ranks 2 and 3 look alike; all four make the overlapped picture too tall
COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "wait": "0.6",
           "optimizer": "tab:green", "all_reduce": "tab:red"}
runs = {name: cluster.run(ddp_runs.time_steps, name, TIMED, STEPS, 1, bucket_cap_mb=BUCKET)
        for name in ("naive", "overlap", "bucket")}
for name, out in runs.items():
    spans = [s for s in trace.merge(o["spans"] for o in out) if s.rank in SHOW_RANKS]
    lab.viz.plot_timeline(spans, colors=COLOURS,
                          title=f"{name}: median step {out[0]['median'] * 1e3:.1f} ms "
                                f"(slowest rank), ranks {SHOW_RANKS[0]}-{SHOW_RANKS[-1]}")
    plt.show()


# %% tags=["nbval-ignore-output"]
step = {name: out[0]["median"] for name, out in runs.items()}
for name, s in step.items():
    print(f"{name:>8}: {s * 1e3:6.1f} ms per step, {runs[name][0]['calls_per_step']:g} "
          "all-reduces per step")
best = min(step, key=step.get)
print(f"Fastest here: {best}, {step['naive'] / step[best]:.2f}x faster than naive."
      if best != "naive" else "Naive was fastest on this run.")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Naive is the longest: its all-reduces start only after backward, so nothing
# hides. Overlapped and bucketed both hide most of the communication under
# backward, but every all-reduce pays the ring's latency, 2(p−1)α: the
# overlapped version pays it once per tensor (12 times), the bucketed one once
# per bucket (5 times), so bucketed is usually the shortest. The printout
# above says what this run measured.
# </details>

# %% [markdown]
# Read the pictures from left to right. In the naive one, each step is compute,
# then a staircase of all-reduces (one per tensor) during which nobody computes.
# In the overlapped one, the red bars start inside the orange backward bar: the
# last layer's gradients travel while the first layers are differentiated, and
# the grey `wait` is what did not fit under backward. Buckets send fewer,
# larger messages, so they pay α fewer times.
#
# **Backward takes longer with overlap than alone.** The spans say by how much:

# %% tags=["nbval-ignore-output"]
def backward_compute(out):
    """Median ms of backward's computation (its span minus the wait in it), slowest rank."""
    per_rank = []
    for o in out:
        waits = [w for w in o["spans"] if w.name == "wait"]
        per_rank.append(np.median([
            b.duration_ns - sum(w.duration_ns for w in waits if b.start_ns <= w.start_ns < b.end_ns)
            for b in o["spans"] if b.name == "backward"]) / 1e6)
    return max(per_rank)


print(f"backward alone: {compute['backward'] * 1e3:.1f} ms")
for name, out in runs.items():
    print(f"backward's computation in {name:>7}: {backward_compute(out):.1f} ms")

# %% [markdown]
# Where the extra time comes from: the hooks run on the same thread as
# backward, between its layers. Each one copies gradients into a bucket,
# divides, and issues an all-reduce; the overlapped version does that for every
# tensor. That host work is on backward's critical path (the emulated clock
# charges each rank the CPU time it spends, not the emulator's own work). On a
# GPU there is a
# second cost the emulation hides: NCCL's all-reduce is itself a kernel, which
# takes SMs and memory bandwidth from the backward kernels running beside it.
#
# ### A span includes waiting for the slowest peer
#
# A collective's span on one rank runs from its call to its completion. A rank
# that arrives early waits inside the collective for the last one, so its span
# is longer; but nobody finishes before the last rank has arrived. So compare
# **end times**, not durations. The first naive all-reduce of each step comes
# right after each rank's own backward, so the ranks arrive at different times:

# %% tags=["nbval-ignore-output"]
naive_spans = trace.merge(o["spans"] for o in runs["naive"])
rows = trace.compare_ends(naive_spans)
print(trace.format_ends(rows, limit=4))
per_step = len(rows) // STEPS  # all-reduces per step; the first of each follows backward
firsts = [r for r in rows if r.index % per_step == 0]
end_spread = np.median([r.end_spread_ns for r in firsts]) / 1e6
dur_spread = np.median([r.duration_spread_ns for r in firsts]) / 1e6
print(f"\nfirst all-reduce of each step: ends differ by {end_spread:.2f} ms between ranks, "
      f"durations by {dur_spread:.2f} ms (medians over {len(firsts)} steps)")
print("The ends agree more closely than the durations: the early ranks' spans include waiting."
      if end_spread < dur_spread else
      "On this run the ranks arrived together, so durations agree as well as ends.")


# %% [markdown]
# ## 5. What overlap can hide: the model and its two bounds
#
# A bucket can only hide under the backward time that is *left* when it is
# ready. With backward producing gradients at a steady rate, bucket `k` is
# ready at `F + B·(bytes so far)/(all bytes)`; on one link it starts when it is
# ready and the previous bucket is done, and costs the ring's
# `2(p−1)α + 2(p−1)/p·n·β`. Communication hides only as far as each bucket's
# all-reduce ends before backward does, and the last bucket's never can: it
# is ready only when backward ends. The step (`ddp.predict_step`) is
#
# `step = max(F + B, end of the last all-reduce) + O`
#
# against `F + B + Σ all-reduces + O` without overlap. Two **lower** bounds
# hold for a measurement, with C the buckets' all-reduces back to back and
# c_last the last bucket's alone (both measured below, without compute):
#
# - the **ideal** `max(F + B + O, C)`: communication hidden under all compute;
# - the **DDP bound** `F + O + max(B + c_last, C)`: forward has no gradient to
#   send yet, the last bucket leaves only when backward ends, and the optimizer
#   waits for the last all-reduce. It is the higher of the two.
#
# A step that waits for every bucket before its optimizer lies at or above the
# DDP bound (above it by what did not hide before the last bucket, and by the
# host's own work); only an optimizer that steps each bucket's parameters after
# its own all-reduce can go below it (next cell). The cell prints how far above
# both the measured step is.

# %% tags=["nbval-ignore-output"]
F, B, O = compute["forward"], compute["backward"], compute["optimizer"]
buckets = ddp.bucket_sizes(TIMED.make_model(), BUCKET)
C = cluster.run(ddp_runs.time_all_reduces, buckets, 2)[0]
c_last = cluster.run(ddp_runs.time_all_reduces, buckets[-1:], 2)[0]
STEP = ddp.StepModel(F, B, O, RANKS, ALPHA, BETA)  # one step's numbers, for every model below
bound = ddp.bounds(STEP, C, c_last)
param_sizes = [p.numel() * 4 for p in TIMED.make_model().parameters()]
predicted = {"naive": ddp.predict_naive(param_sizes, STEP),
             "bucket": ddp.predict_step(buckets, STEP)}
hidden = ddp.hidden_fraction(buckets, STEP)
print(f"{len(buckets)} buckets; C = {C * 1e3:.1f} ms measured, c_last = {c_last * 1e3:.1f} ms; "
      f"{hidden:.0%} of the communication hides under backward (model)")
for name, t in predicted.items():
    print(f"{name:>7}: model {t * 1e3:6.1f} ms, measured {step[name] * 1e3:6.1f} ms "
          f"({step[name] / t:.2f}x the model)")
for name, t in bound.items():
    print(f"{name:>9}: {t * 1e3:6.1f} ms; bucketed measured is {step['bucket'] / t:.2f}x it")

# %% [markdown]
# **The optimizer need not wait for every bucket.** The DDP bound assumes the
# optimizer steps all parameters after the last all-reduce. But an optimizer
# like SGD or AdamW updates each parameter from its own gradient: bucket k's
# parameters can be stepped as soon as bucket k's all-reduce is done, while
# later buckets are still in flight. torch's DDP can do this
# (`DistributedDataParallel._register_fused_optim`: "optimize parameter
# immediately after its gradient reduction"; so can `_apply_optimizer_in_backward`
# without DDP). Then only the last bucket's share of the optimizer stays after
# the last all-reduce. The model, with and without:

# %% tags=["nbval-ignore-output"]
fused = ddp.predict_step(buckets, STEP, optimizer_overlap=True)
print(f"model, optimizer after the last all-reduce:  {predicted['bucket'] * 1e3:.1f} ms per step")
print(f"model, each bucket stepped after its own:   {fused * 1e3:.1f} ms per step "
      f"({(predicted['bucket'] - fused) * 1e3:.1f} ms less)")

# %% [markdown]
# ### Step time against bucket size
#
# For the cap to matter, the model must have many tensors: this one has 16
# layers of 128 (32 tensors of 64 KiB or 512 B), so a small cap makes up to 32
# buckets, and a large one makes a single bucket; and a message must cost
# enough: 500 µs of latency here.
#
# **Predict, then drag.** Where along the caps is the step shortest: at the
# smallest cap, the largest, or in between? Drag the slider: the model's
# timeline of one step changes with the cap, and the dot moves along the
# model's step time for every cap (the picture above the slider is its default
# view, for a reader without a kernel).

# %% tags=["nbval-ignore-output"]
SWEEP_CFG = workload.Config(in_features=128, hidden=128, layers=16, out_features=128, batch=16,
                       compute_ms=30)
sweep_model = SWEEP_CFG.make_model()
sweep_compute = cluster.run(ddp_runs.time_compute, SWEEP_CFG, 3, 1)[0]
SF, SB, SO = sweep_compute["forward"], sweep_compute["backward"], sweep_compute["optimizer"]
SWEEP_NET = ddp.network_for(SB, SWEEP_CFG.param_bytes(), RANKS, latency=500e-6, ratio=0.8)
SA, SBETA = SWEEP_NET.inter.alpha, SWEEP_NET.inter.beta
CAPS = [2**k / 1024 for k in range(-2, 12)]  # 0.25 KiB .. 2 MiB
SWEEP_STEP = ddp.StepModel(SF, SB, SO, RANKS, SA, SBETA)
model_at = {cap: ddp.predict_step(ddp.bucket_sizes(sweep_model, cap), SWEEP_STEP)
            for cap in CAPS}
best_cap = min(model_at, key=model_at.get)
plot_bucket_choice(lambda cap: ddp.bucket_sizes(sweep_model, cap), CAPS, SWEEP_STEP, best_cap,
                   title=f"bucket_cap_mb = {best_cap * 1024:g} KiB, the model's "
                         f"best: {model_at[best_cap] * 1e3:.1f} ms per step")
plt.show()
bucket_slider(lambda cap: ddp.bucket_sizes(sweep_model, cap), CAPS, SWEEP_STEP, value=best_cap)

# %% [markdown]
# <details><summary>Answer</summary>
#
# In between, a U. Too small buckets pay α for every bucket: at the smallest
# caps each of the 32 tensors is its own bucket and pays the ring's 2(p−1)α.
# Too large ones are ready late (a bucket leaves only with its last gradient),
# so less hides: one bucket leaves only when backward ends, and nothing hides.
# The best cap balances the two.
# </details>
#
# Now measured: the same model on that network, at a few caps, against the
# model's curve.

# %% tags=["nbval-ignore-output"]
_ = cluster.run(emulator.set_network, SWEEP_NET)
SWEEP = CAPS[::2] if FULL_SWEEP else [CAPS[0], CAPS[4], best_cap, CAPS[12]]
SWEEP = sorted(set(SWEEP))
measured = {cap: cluster.run(ddp_runs.time_steps, "bucket", SWEEP_CFG, STEPS, 1,
                             bucket_cap_mb=cap)[0]["median"] for cap in SWEEP}
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(np.array(CAPS) * 1024, np.array(list(model_at.values())) * 1e3, label="model")
ax.plot(np.array(SWEEP) * 1024, np.array(list(measured.values())) * 1e3, "o",
        label="measured (median)")
naive_model = ddp.predict_naive([p.numel() * 4 for p in sweep_model.parameters()],
                                SWEEP_STEP)
ax.axhline(naive_model * 1e3, color="0.6", linestyle="--", label="model, naive")
ax.set_xscale("log", base=2)
ax.set_xlabel("bucket_cap_mb (KiB)")
ax.set_ylabel("step time (ms)")
ax.set_ylim(bottom=0)
ax.legend()
ax.set_title(f"bucketed DDP on {RANKS} ranks, {len(list(sweep_model.parameters()))} tensors")
plt.show()
for cap, t in measured.items():
    n = len(ddp.bucket_sizes(sweep_model, cap))
    plural = "s" if n != 1 else " "
    print(f"{cap * 1024:>6g} KiB: {n:>2} bucket{plural}, measured {t * 1e3:6.1f} ms, "
          f"model {model_at[cap] * 1e3:6.1f} ms ({t / model_at[cap]:.2f}x)")
best_measured = min(measured, key=measured.get)
left, right = min(SWEEP), max(SWEEP)
print(f"Measured: the smallest cap is {measured[left] / measured[best_measured]:.2f}x and the "
      f"largest {measured[right] / measured[best_measured]:.2f}x the fastest "
      f"({best_measured * 1024:g} KiB); the model says "
      f"{model_at[left] / model_at[best_measured]:.2f}x and "
      f"{model_at[right] / model_at[best_measured]:.2f}x.")

# %% [markdown]
# Where the dots sit above the line, the gap is what the model leaves out: the
# host work of each bucket (the hooks, the copy into the bucket and back, which
# the emulated clock charges as CPU time), which grows with the number of
# buckets.
#
# ## 6. torch's DDP does the same, and more
#
# `torch.nn.parallel.DistributedDataParallel` is this design in C++ (Li et al.
# 2020), and the course's versions follow it: hooks on the gradient
# accumulators, the broadcast at construction, buckets by `bucket_cap_mb`
# (MiB), sent in bucket order, waited for before backward returns,
# `no_sync()`, `find_unused_parameters`. What torch 2.13 adds or does
# differently:
#
# - **The first iteration is one bucket.** Before it has seen the order in
#   which gradients arrive, DDP puts every gradient in one bucket (with
#   `find_unused_parameters=False`, the default, or `static_graph=True`);
#   after the first iteration it **rebuilds** its buckets in the order the
#   gradients really arrived. Profile after warm-up. With
#   `find_unused_parameters=True` it buckets once, in reverse registration
#   order, and never rebuilds. (The course's versions bucket in reverse
#   registration order from the start.)
# - **A small first bucket**, 1 MiB, only with the default `bucket_cap_mb`
#   (`None`): with a cap you choose, every bucket has that cap. After the
#   rebuild it is the first bucket to leave; with `find_unused_parameters=True`
#   it holds the first-registered parameters and leaves last (section 3).
# - `gradient_as_bucket_view=True`: each `.grad` becomes a view into its
#   bucket, which removes the copy back that `wait_for_gradients` does (and
#   a gradient's worth of memory).
# - `static_graph=True`: the set of used parameters and the order of gradients
#   never change, so DDP can skip the search for unused parameters.
# - **Buffers** are broadcast again at every forward (`forward_sync_buffers`,
#   which replaces `broadcast_buffers` in 2.13; on by default). The course's
#   versions broadcast them at construction only, so that the traffic they are
#   measured by is the gradients' alone.
# - **Communication hooks** (`register_comm_hook`) replace a bucket's
#   all-reduce: `fp16_compress_hook` halves the bytes, `powerSGD_hook` sends a
#   low-rank approximation (notebook 08).
#
# The first two, seen from a communication hook that records each bucket's
# size, at the first two steps (default `bucket_cap_mb`):

# %% tags=["nbval-ignore-output"]
def torch_buckets(cfg, steps=2):
    """On every rank: elements per bucket that torch's DDP all-reduces, at each step."""
    model = torch.nn.parallel.DistributedDataParallel(cfg.make_model())
    seen = []

    def record(_, bucket):
        seen[-1].append(sum(p.numel() for p in bucket.parameters()))
        buffer = bucket.buffer().div_(dist.get_world_size())
        return dist.all_reduce(buffer, async_op=True).get_future().then(lambda f: f.value()[0])

    model.register_comm_hook(None, record)
    for step in range(steps):
        seen.append([])
        x, y = cfg.local_batch(step, dist.get_rank(), dist.get_world_size())
        cfg.loss(model(x), y).backward()
    return seen


BIG = workload.Config(in_features=512, hidden=512, layers=3, out_features=512, batch=8)
for step_no, sizes_seen in enumerate(cluster.run(torch_buckets, BIG)[0]):
    mib = ", ".join(f"{n * 4 / 2**20:.2f}" for n in sizes_seen)
    print(f"torch DDP, step {step_no}: {len(sizes_seen)} bucket(s) of {mib} MiB")
print("ours (ddp.Bucketed, bucket_cap_mb=None):",
      ", ".join(f"{n / 2**20:.2f}" for n in ddp.bucket_sizes(BIG.make_model(), None)), "MiB")

# %% [markdown]
# With the same bucket size as ours, on the slow network, the two take:

# %% tags=["nbval-ignore-output"]
_ = cluster.run(emulator.set_network, NET)
torch_step = cluster.run(ddp_runs.time_steps, "torch", TIMED, STEPS, 2, bucket_cap_mb=BUCKET)[0]
ratio = torch_step["median"] / step["bucket"]
print(f"torch DDP {torch_step['median'] * 1e3:.1f} ms, ours {step['bucket'] * 1e3:.1f} ms per "
      f"step: torch's takes {ratio:.2f}x ours.")

# %% [markdown]
# **ZeRO and FSDP change the traffic, not just its timing.** In the ZeRO
# paper's notation (Rajbhandari et al. 2020, §7), Ψ is the number of
# parameters. Data parallelism moves about 2Ψ elements per rank per step (a
# ring all-reduce is a reduce-scatter plus an all-gather, exactly (p−1)/p·Ψ
# each, 2(p−1)/p·Ψ together); ZeRO stages 1 and 2 shard the optimizer state and the
# gradients at the same 2Ψ; ZeRO-3 (FSDP's full sharding) also shards the
# parameters, which must be all-gathered for forward and again for backward:
# 3Ψ, **1.5× DDP's**. The formulas live in `labsupport/sharding/memory.py`;
# notebook 11 builds ZeRO-2 and ZeRO-3 and measures them. For this notebook's
# timed model, in float32:

# %%
from labsupport import sharding

psi = TIMED.param_count()
print(f"Ψ = {psi:,} parameters ({4 * psi / 1e6:.2f} MB in float32). Per rank per step:")
for stage in (0, 3):
    sent = sharding.step_bytes(psi, stage, RANKS)  # bytes per rank per step, float32
    print(f"{sharding.NAMES[stage]:<6} {sent / (4 * psi):.2f}·Ψ = {sent / 1e6:.2f} MB")
print("(the paper's ≈2Ψ and 3Ψ are the large-p limits)")

# %% [markdown]
# ## 7. 1F1B is pipeline parallelism, not DDP overlap
#
# DDP's overlap hides the all-reduces of one model replica's gradients behind
# its own backward. **1F1B** is something else: a schedule of *pipeline*
# parallelism, where the model is split into stages on different ranks and the
# batch into micro-batches, and the ranks exchange activations and their
# gradients by point-to-point, not gradients of the same weights. Each stage
# runs a few forwards, then alternates one forward and one backward. Filling
# and draining the pipeline leaves every stage idle for a fraction (p − 1)/m
# of its work, the **bubble**, for 1F1B as for GPipe (Narayanan et al. SC'21,
# §2.2); 1F1B's gain is activation memory. The two combine (each pipeline
# stage can be data-parallel); they do not replace each other.
#
# Notebook 12 builds both schedules on ranks (`labsupport/parallel/pipeline.py`),
# checks them against one process and against torch's `ScheduleGPipe` and
# `Schedule1F1B`, and measures the bubble and the activations each stage holds
# on the emulated network: [12 · Model parallelism](12_parallelism.ipynb),
# section 4.

# %% [markdown]
# > **Common mistakes**
# > - All-reducing the hook's argument: `register_post_accumulate_grad_hook`
# >   passes the parameter; all-reduce `param.grad`.
# > - **Issuing, then waiting at once.** `dist.all_reduce(g, async_op=True).wait()`
# >   inside the hook (or `.get_future().wait()`, or `torch.futures.wait_all`)
# >   gives the right numbers and hides nothing: backward stands still until
# >   the all-reduce has finished. The grader says so, with the time (below).
# > - **Sending everything at the end.** Counting the gradients and issuing
# >   every all-reduce from the last one's hook is "during backward", yet each
# >   starts when there is no compute left to hide behind. The grader compares
# >   each all-reduce's issue time with the moment it could have left.
# > - **Sending buckets in the order they fill.** Right on one rank, wrong as
# >   soon as two ranks see gradients in different orders; send in bucket order.
# > - **Waiting after `optimizer.step()`.** The step then reads gradients whose
# >   all-reduce may still be running: each rank updates with its own partial
# >   gradient, and the replicas drift apart silently. Code seen in circulation
# >   calls this "1F1B"; it is neither 1F1B nor correct.
# > - Timing without a barrier, warm-up and the slowest rank: the numbers then
# >   measure who arrived first.
#
# The second mistake, through the grader:

# %% tags=["nbval-ignore-output"]
class WaitsAtOnce(ddp.Overlapped):
    def grad_ready(self, param):
        param.grad.div_(self.world_size)
        dist.all_reduce(param.grad, async_op=True).wait()  # hides nothing


_ = check_overlapped(WaitsAtOnce, cluster)

# %% [markdown]
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/ddp/base.py` (`DDPBase`): a wrapper's plumbing, as torch's DDP has it.
# - `labsupport/ddp/versions.py`: the four versions: naive, flat, overlapped, bucketed.
# - `labsupport/ddp/buckets.py`: torch's bucket rule (`assign_buckets`).
# - `labsupport/ddp/predict.py`: the step-time model and its bounds (`predict_step`).

# %% [markdown]
# ## Recap
#
# - `async_op=True` returns a Work: issue early, compute, `wait()` before you
#   touch the tensor. A future's completion is the operation's end on gloo,
#   its queuing on NCCL/HCCL.
# - Data parallelism as torch does it: a module wrapper that broadcasts rank
#   0's state, averages every gradient (divide, then all-reduce) by the time
#   `backward()` returns, and is checked against one process.
# - Overlap: a hook per parameter starts its all-reduce during backward;
#   buckets (torch's rule, in MiB) trade α per message against how early the
#   first bucket can leave, and leave in bucket order.
# - A collective's span on one rank includes waiting for the slowest peer:
#   compare end times.
# - The ideal `max(F + B + O, C)` and the DDP bound `F + O + max(B + c_last, C)`
#   are both lower bounds: a step whose optimizer waits for every bucket lies
#   at or above the DDP bound; stepping each bucket's parameters after its own
#   all-reduce can bring it below.
# - 1F1B is a pipeline schedule with GPipe's bubble, `(p−1)/m` (notebook 12);
#   ZeRO-3 moves 1.5× DDP's bytes (notebook 11).
#
# ## Where to go next
#
# - `examples/ddp_overlap.py` runs the same versions under `torchrun` on a real
#   cluster: `torchrun --nproc_per_node=8 examples/ddp_overlap.py --version
#   bucket --bucket-mb 25 --check`.
# - `benchmarks/overlap.py` measures all the versions on the emulated network.
# - Notebook 08 compresses what goes over the wire; notebook 10 builds ZeRO-1;
#   notebook 11 shards gradients and parameters (ZeRO-2, ZeRO-3); notebook 12
#   splits the model itself (tensor, pipeline and expert parallelism).

# %%
cluster.shutdown()
