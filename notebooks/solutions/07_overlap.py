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
# # 07 · Overlapping communication with computation
#
# Data-parallel training all-reduces every gradient at every step. Done after
# the backward pass, that time simply adds up. But backward produces the last
# layer's gradients first: they can travel while the earlier layers are still
# being differentiated. This notebook builds data-parallel training by hand,
# from the naive version to the one torch's `DistributedDataParallel` (DDP)
# uses, and *looks* at where the time goes, rank by rank.
#
# **You will leave this notebook able to**
# - use asynchronous handles: `async_op=True`, `isend`/`irecv`, `Work.wait()`,
#   futures;
# - write data-parallel training by hand: naive, flat, overlapped with
#   gradient hooks, bucketed;
# - read per-rank timelines of compute and communication, and know what a
#   collective's span on one rank does and does not mean;
# - predict from the α-β model and the backward time how much overlap can hide,
#   and check it;
# - tell DDP's overlap from pipeline parallelism's 1F1B schedule;
# - say what torch's DDP does the same way, and what ZeRO changes in traffic.
#
# The exercises are **Exercise 07.1** (the overlapped version) and **Exercise
# 07.2** (the bucketed version). Sources are in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding).

# %%
import inspect
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import ddp, netem, trace
from labsupport.check.overlap import check_bucketed, check_overlapped

# %load_ext labsupport

# %% [markdown]
# Sizes are small so that the whole notebook runs in about a minute on a
# laptop. `FULL_SWEEP = True` measures more bucket sizes and more steps (a few
# minutes).

# %%
RANKS = 4
FULL_SWEEP = False  # True: the bucket-size sweep with more sizes and steps
STEPS = 6 if FULL_SWEEP else 3
CFG = ddp.Config(in_features=256, hidden=384, layers=6, out_features=16, batch=4096)
print(f"model: {CFG.layers} linear layers, {CFG.param_bytes() / 1e6:.2f} MB of parameters; "
      f"global batch {CFG.batch} ({CFG.batch // RANKS} rows per rank)")

# %% [markdown]
# The ranks start on an emulated network (`labsupport.netem`, notebook 04) that
# is nearly free for now; section 4 slows it down. Each rank gets
# `cores // ranks` threads (`ddp.use_threads`): more threads than cores per
# rank make the ranks fight for the cores and a step many times slower.

# %% tags=["nbval-ignore-output"]
FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
cluster = lab.Cluster(RANKS, network=FAST)
print("threads per rank:", cluster.run(ddp.use_threads)[0])

# %% [markdown]
# ## 1. Asynchronous handles
#
# Every collective takes `async_op=True`. It then returns at once with a
# **Work** handle, while the operation proceeds in the background; the tensor
# holds the result only after `work.wait()` returns. In between, the rank is
# free to compute, as long as it does not touch that tensor.
#
# Compare: 120 small matrix products, then a 4 MiB all-reduce; and the same
# all-reduce issued first, the products done while it is in flight. The
# network here is slow enough that the all-reduce costs about as much as the
# products:

# %%
def blocking_then_async(nbytes=4 << 20, products=120):
    """On every rank: seconds (slowest rank) for compute-then-all_reduce and for the overlap."""
    a = torch.randn(192, 192)
    x = torch.ones(nbytes // 4)

    def compute():
        for _ in range(products):
            a @ a

    times = []
    for overlap in (False, True):
        dist.barrier()
        start = time.perf_counter()
        if overlap:
            work = dist.all_reduce(x, async_op=True)  # returns at once
            compute()  # runs while the all-reduce is in flight
            work.wait()  # only now is x reduced
        else:
            compute()
            dist.all_reduce(x)
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


SLOW = netem.Network(inter=netem.Link(latency=200e-6, bandwidth=100e6), ranks_per_node=1)
cluster.run(netem.set_network, SLOW)
blocking, overlapped = cluster.run(blocking_then_async)[0]
cluster.run(netem.set_network, FAST)

# %% tags=["nbval-ignore-output"]
print(f"compute, then all_reduce: {blocking * 1e3:6.1f} ms")
print(f"all_reduce in flight while computing: {overlapped * 1e3:6.1f} ms")
print("Issuing the all-reduce first and waiting later was "
      + (f"{blocking / overlapped:.1f}x faster." if overlapped < blocking
         else "not faster on this run: the machine was too busy to compute while the "
              "emulated network waited. Run the cell again."))

# %% [markdown]
# A Work also has a **future** (`work.get_future()`, a `torch.futures.Future`):
# `then(callback)` runs the callback when the operation finishes, on one of the
# backend's threads, whether or not anybody waits. DDP's communication hooks
# return such futures; `labsupport.trace` uses them to record when a collective
# completed. Point-to-point has the same shape: `isend`/`irecv` return handles
# (on gloo without a future). A ring shift, everyone sending right and
# receiving from the left, without deadlock because nobody blocks before both
# are posted:

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
# ## 2. Data parallelism, checked against one process
#
# Every rank holds the whole model and a slice of the global batch. Each
# computes gradients on its slice; averaging them over the ranks gives exactly
# the gradient of the mean loss over the whole batch. So every version below
# must give the **same gradients and weights as one process** training on the
# global batch, up to float rounding. `labsupport.ddp` has the model (an MLP),
# the synthetic data from fixed seeds and that baseline (`ddp.baseline`).
#
# A version is a small class: `wrap(model)` prepares it, `finish()` returns once
# every `param.grad` holds the average. The training step around it is always
# the same:

# %%
print(inspect.getsource(ddp.train_step))

# %% [markdown]
# **Naive**: after backward, one blocking all-reduce per parameter (divide by
# the world size first: the sum of the ranks' `g/p` is their mean).
# **Flat**: one all-reduce of every gradient copied into one buffer: one α
# instead of one per tensor, but still nothing overlaps.

# %%
class Naive(ddp.Version):
    def finish(self):
        for p in self.params:
            p.grad.div_(dist.get_world_size())
            dist.all_reduce(p.grad)


class Flat(ddp.Version):
    def finish(self):
        grads = [p.grad for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(dist.get_world_size())
        dist.all_reduce(flat)
        for g, part in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(part.view_as(g))


def same_as_one_process(version, steps=3):
    """Train `steps` steps on every rank; True if every rank matches the baseline."""
    expected = ddp.baseline(steps, CFG)
    results = cluster.run(ddp.train, version, steps, CFG)
    return all(
        all(torch.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(r[key], expected[key]))
        for r in results for key in ("grads", "weights")
    )


for version in (Naive, Flat):
    print(f"{version.__name__}: same gradients and weights as one process:",
          same_as_one_process(version))

# %% [markdown]
# ## 3. Overlap: all-reduce each gradient as soon as it is ready
#
# `Tensor.register_post_accumulate_grad_hook(hook)` calls `hook` during
# backward, right after a parameter's gradient has been accumulated into
# `.grad`. The hook's argument is **the parameter**, not the gradient:
# all-reducing the argument would average the *weights*. Issue the all-reduce
# of `param.grad` from the hook with `async_op=True`, keep the handle, and wait
# for all of them in `finish()`, before the optimizer step.
#
# **Exercise 07.1.** Complete `hook` and `finish`. The grader trains the model
# for 3 steps on every rank and compares with one process, and checks that the
# all-reduces were issued during backward.

# %%
# Exercise 07.1: the overlapped version, with gradient hooks
class MyOverlapped(ddp.Version):
    def __init__(self):
        super().__init__()
        self.handles = []

    def wrap(self, model):
        super().wrap(model)
        for p in self.params:
            p.register_post_accumulate_grad_hook(self.hook)
        return model

    def hook(self, param):
        """Called during backward once param.grad is complete: start its all-reduce."""
        # BEGIN SOLUTION
        param.grad.div_(dist.get_world_size())
        self.handles.append(dist.all_reduce(param.grad, async_op=True))
        # END SOLUTION

    def finish(self):
        """After backward: wait until every gradient is averaged."""
        # BEGIN SOLUTION
        for work in self.handles:
            work.wait()
        self.handles.clear()
        # END SOLUTION


# %%
check_overlapped(MyOverlapped, cluster)

# %% [markdown]
# ### Buckets
#
# One all-reduce per parameter pays α per tensor; one flat all-reduce cannot
# start before the last gradient exists. **Buckets** sit in between: walk the
# parameters in reverse order (the order backward finishes them), put them in
# a bucket until it holds at least `bucket_bytes`, then start a new one. When a
# bucket's last gradient is ready, copy its gradients into one flat buffer and
# start its all-reduce, asynchronously. `ddp.make_buckets(sizes, bucket_bytes)`
# does the grouping:

# %%
sizes = [p.numel() * 4 for p in ddp.make_model(CFG).parameters()][::-1]
print("gradient sizes in the order backward produces them (bytes):", sizes)
for cap in (100_000, 600_000, 1 << 30):
    print(f"bucket_bytes = {cap:>10}: buckets {ddp.make_buckets(sizes, cap)}")

# %% [markdown]
# **Exercise 07.2.** Complete `ready` (called by each parameter's hook) and
# `finish`. The grader checks the gradients against one process and the number
# of `dist.all_reduce` calls per step (one per bucket) for several bucket sizes.

# %%
# Exercise 07.2: the bucketed version
class MyBucketed(ddp.Version):
    def __init__(self, bucket_bytes):
        super().__init__()
        self.bucket_bytes = bucket_bytes
        self.handles = []  # (work, flat buffer, the bucket's parameters)

    def wrap(self, model):
        super().wrap(model)
        order = self.params[::-1]  # the order backward finishes them
        groups = ddp.make_buckets([p.numel() * p.element_size() for p in order],
                                  self.bucket_bytes)
        self.buckets = [[order[i] for i in g] for g in groups]
        self.bucket_of = {id(p): k for k, b in enumerate(self.buckets) for p in b}
        self.missing = [len(b) for b in self.buckets]  # gradients not ready yet, per bucket
        for p in self.params:
            p.register_post_accumulate_grad_hook(self.ready)
        return model

    def ready(self, param):
        """param.grad is complete; if it completes its bucket, start the bucket's all-reduce."""
        # BEGIN SOLUTION
        k = self.bucket_of[id(param)]
        self.missing[k] -= 1
        if self.missing[k] == 0:
            bucket = self.buckets[k]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).div_(dist.get_world_size())
            self.handles.append((dist.all_reduce(flat, async_op=True), flat, bucket))
        # END SOLUTION

    def finish(self):
        """Wait for every bucket, copy the averages back into param.grad, reset for next step."""
        # BEGIN SOLUTION
        for work, flat, bucket in self.handles:
            work.wait()
            for p, part in zip(bucket, flat.split([p.numel() for p in bucket])):
                p.grad.copy_(part.view_as(p.grad))
        self.handles.clear()
        self.missing = [len(b) for b in self.buckets]
        # END SOLUTION


# %%
check_bucketed(MyBucketed, cluster)

# %% [markdown]
# ## 4. Timelines on a network where communication matters
#
# On loopback the all-reduces are nearly free and overlap has nothing to hide.
# So first measure this machine's compute (forward, backward, optimizer, on
# all ranks at once, no communication), then choose an emulated network on
# which one all-reduce of all gradients takes about 80 % of the backward pass:
# one NIC per rank, 200 µs per message, and the bandwidth that makes it so
# (`ddp.network_for`).
#
# One more change first. On an accelerator the host CPU is free while the
# device computes, so the network's work (here: the emulator's threads and
# gloo's copies over loopback) runs beside backward. On a laptop, four ranks'
# real backward passes fill every core, and communication has to wait for a
# core: overlap would hide little, and that would be a lesson about the laptop,
# not about DDP. So from here the model's compute is **emulated**:
# `ddp.Config(compute_ms=…)` adds to each layer a step that sleeps in forward
# and twice as long in backward, and a small batch keeps the real arithmetic
# small. The gradients are exactly the same (the tests check it); only where
# the time goes changes. (`benchmarks/overlap.py --compute-ms 0` shows the
# real-compute version and what it costs.)

# %%
TIMED = ddp.Config(in_features=256, hidden=384, layers=6, out_features=16, batch=16,
                   compute_ms=30)
print(f"timed model: the same {TIMED.param_bytes() / 1e6:.2f} MB of parameters; "
      f"{TIMED.compute_ms:.0f} ms of emulated forward, {2 * TIMED.compute_ms:.0f} ms of backward")

# %% tags=["nbval-ignore-output"]
compute = cluster.run(ddp.time_compute, 5, 2, TIMED)[0]
NBYTES = TIMED.param_bytes()
NET = ddp.network_for(compute["backward"], NBYTES, RANKS, latency=200e-6, ratio=0.8)
cluster.run(netem.set_network, NET)
ALPHA, BETA = NET.inter.alpha, NET.inter.beta
print("compute per step: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in compute.items()))
print(f"network: {NET}")

# %% [markdown]
# The three hand-written versions that matter (the library's copies of the
# classes above, which record every span with `labsupport.trace`): naive,
# overlapped, bucketed with 256 KiB buckets, 3 steps each. One row per rank
# and lane; the comm lane gets another row whenever one more all-reduce is in
# flight at once. A span runs from the call to completion, so it includes the
# time an all-reduce waits in the queue behind the ones issued before it: the
# staircase in the overlapped picture is that queue.

# %% tags=["nbval-ignore-output"]
BUCKET = 256 << 10
SHOW_RANKS = (0, 1)  # ranks 2 and 3 look alike; all four make the overlapped picture too tall
COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "wait": "0.7",
           "optimizer": "tab:green", "all_reduce": "tab:red"}
runs = {name: cluster.run(ddp.time_steps, name, STEPS, 1, TIMED, BUCKET)
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
    print(f"{name:>8}: {s * 1e3:6.1f} ms per step")
best = min(step, key=step.get)
print(f"Fastest here: {best}, {step['naive'] / step[best]:.2f}x faster than naive."
      if best != "naive" else
      "Naive was fastest on this run: the emulated network's threads took CPU from the "
      "backward pass of a busy machine. Close other programs and run the cell again.")

# %% [markdown]
# Read the pictures from left to right. In the naive one, each step is compute,
# then a staircase of all-reduces (one per tensor) in which nobody computes. In
# the overlapped one, the red bars start inside the orange backward bar: the
# last layer's gradients travel while the first layers are differentiated, and
# the grey `wait` before the optimizer is what did not fit under backward.
# Buckets send fewer, larger messages, so they pay α fewer times. Which
# version wins on your machine is the sentence under the pictures: on a busy
# laptop the emulator's threads take CPU from the backward pass, and the
# ranking can change from run to run.
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
# ## 5. What overlap can hide: the inequality
#
# A bucket can only hide under the backward time that is *left* when it is
# ready. With backward producing gradients at a steady rate, bucket `k` is
# ready at `F + B·(bytes so far)/(all bytes)`; on one link it starts when it is
# ready and the previous bucket is done, and costs the ring's
# `2(p−1)α + 2(p−1)/p·n·β`. Communication is hidden when every bucket ends
# before backward does; the last bucket never can, since it is ready only when
# backward ends. The step is then
#
# `step = max(F + B, end of the last all-reduce) + optimizer`
#
# (`ddp.predict_step`), against `F + B + Σ all-reduces + optimizer` without
# overlap. For your settings:

# %% tags=["nbval-ignore-output"]
F, B, O = compute["forward"], compute["backward"], compute["optimizer"]
buckets = ddp.bucket_bytes(ddp.make_model(TIMED), BUCKET)
comm_total = sum(lab.costmodel.ring_all_reduce_time(n, RANKS, ALPHA, BETA) for n in buckets)
hidden = ddp.hidden_fraction(buckets, F, B, RANKS, ALPHA, BETA)
param_sizes = [p.numel() * 4 for p in ddp.make_model(TIMED).parameters()]
predicted = {
    "naive": ddp.predict_naive(param_sizes, F, B, O, RANKS, ALPHA, BETA),
    "bucket": ddp.predict_step(buckets, F, B, O, RANKS, ALPHA, BETA),
}
print(f"{len(buckets)} buckets; communication {comm_total * 1e3:.1f} ms "
      f"{'<=' if comm_total <= B else '>'} backward {B * 1e3:.1f} ms; "
      f"{hidden:.0%} of it hides under backward (model)")
for name, t in predicted.items():
    print(f"{name:>7}: model {t * 1e3:6.1f} ms, measured {step[name] * 1e3:6.1f} ms")

# %% [markdown]
# ### Step time against bucket size
#
# Too small buckets pay α for every bucket; too large ones are ready late (a
# bucket leaves only with its last gradient), so less hides. The model's curve
# has a flat bottom in between; the dots are measured. The model knows only
# α and β: on a busy laptop each emulated message also costs some CPU time
# (notebook 04 measured this floor), so the dots sit above the line, most at
# small buckets.

# %% tags=["nbval-ignore-output"]
SWEEP = ([16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20] if FULL_SWEEP
         else [16 << 10, 256 << 10, 4 << 20])
measured = [cluster.run(ddp.time_steps, "bucket", STEPS, 1, TIMED, b)[0]["median"] for b in SWEEP]
fine = np.logspace(np.log2(4 << 10), np.log2(8 << 20), 40, base=2)
model_curve = [ddp.predict_step(ddp.bucket_bytes(ddp.make_model(TIMED), int(b)), F, B, O,
                                RANKS, ALPHA, BETA) for b in fine]
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(fine / 1024, np.array(model_curve) * 1e3, label="model (ddp.predict_step)")
ax.plot(np.array(SWEEP) / 1024, np.array(measured) * 1e3, "o", label="measured (median)")
ax.axhline(predicted["naive"] * 1e3, color="0.6", linestyle="--", label="model, naive")
ax.set_xscale("log", base=2)
ax.set_xlabel("bucket size (KiB)")
ax.set_ylabel("step time (ms)")
ax.set_ylim(bottom=0)
ax.legend()
ax.set_title(f"bucketed DDP on {RANKS} ranks, emulated network")
for b, t in zip(SWEEP, measured):
    print(f"{b >> 10:>6} KiB buckets: {t * 1e3:6.1f} ms per step")
model_at = [ddp.predict_step(ddp.bucket_bytes(ddp.make_model(TIMED), b), F, B, O, RANKS, ALPHA, BETA)
            for b in SWEEP]
best_measured, best_model = SWEEP[int(np.argmin(measured))], SWEEP[int(np.argmin(model_at))]
print(f"Fastest measured: {best_measured >> 10} KiB buckets; the model's choice among these: "
      f"{best_model >> 10} KiB. "
      + ("They agree." if best_measured == best_model else
         "They differ: on this machine the emulator's cost per message (CPU, Python, "
         "threads) adds to every bucket, which favours fewer buckets than the model does."))

# %% [markdown]
# ## 6. torch's DDP does the same
#
# `torch.nn.parallel.DistributedDataParallel` is this design (Li et al. 2020), in C++: hooks on
# the gradient accumulators, parameters in **reverse order** in buckets of
# `bucket_cap_mb` (default **25** MB; the first bucket is smaller), each
# bucket all-reduced asynchronously when full, waited for before backward
# returns. It rebuilds its buckets after the first iteration from the order in
# which gradients really arrived (profile after warm-up). It adds `no_sync()`
# (skip the all-reduce on gradient-accumulation micro-steps), and
# **communication hooks** (`register_comm_hook`) that replace the all-reduce of
# a bucket: `fp16_compress_hook` halves the bytes, `powerSGD_hook` sends a
# low-rank approximation. With the same bucket size as ours:

# %% tags=["nbval-ignore-output"]
torch_ddp = cluster.run(ddp.time_steps, "torch", STEPS, 2, TIMED, BUCKET)[0]["median"]
ratio = torch_ddp / step["bucket"]
print(f"torch DDP {torch_ddp * 1e3:.1f} ms, ours {step['bucket'] * 1e3:.1f} ms per step: "
      + ("about the same (within 20 %)." if 0.8 < ratio < 1.25 else
         f"torch's is {'faster' if ratio < 1 else 'slower'} by {abs(1 - ratio):.0%} here."))

# %% [markdown]
# **ZeRO and FSDP change the traffic, not just its timing.** DDP moves `2Ψ`
# bytes per step for `Ψ` bytes of gradients (a ring all-reduce is a
# reduce-scatter plus an all-gather, each moving about `Ψ`). ZeRO stages 1 and
# 2 shard optimizer state and gradients at the same `2Ψ`; ZeRO-3 (FSDP's full
# sharding) also shards the parameters, which must be all-gathered for forward
# and again for backward: `3Ψ`, **1.5× DDP's bytes** (Rajbhandari et al.
# 2020, §7). For this model:

# %%
psi = CFG.param_bytes()
print(f"Ψ = {psi / 1e6:.2f} MB: DDP ≈ {2 * psi / 1e6:.2f} MB per rank per step, "
      f"ZeRO-3 ≈ {3 * psi / 1e6:.2f} MB ({3 / 2:.1f}×)")

# %% [markdown]
# ## 7. 1F1B is pipeline parallelism, not DDP overlap
#
# Pipeline parallelism splits the *model* into `p` stages on `p` ranks and the
# batch into `m` micro-batches. In the **1F1B** schedule (PipeDream; Narayanan
# et al.) each stage runs a few forwards, then alternates one forward and one
# backward, so that at most `p` micro-batches' activations are alive. The
# ranks exchange activations and their gradients (point-to-point), not
# gradients of the same weights; what it hides is idle stages, and it cannot
# hide them all: the start and the end of the schedule leave a **bubble** of
# `(p−1)` slots per stage, a fraction `(p−1)/m` of the useful work. DDP's
# overlap hides all-reduces of one model replica behind its own backward. The
# two combine (each pipeline stage can be data-parallel), they do not replace
# each other.

# %%
def one_f_one_b(p, m):
    """Start slot of each (stage, kind, micro-batch) in 1F1B; forward and backward take 1 slot."""
    order = []
    for s in range(p):
        warm = min(p - s - 1, m)
        ops = [("F", i) for i in range(warm)]
        for i in range(m - warm):
            ops += [("F", warm + i), ("B", i)]
        ops += [("B", i) for i in range(m - warm, m)]
        order.append(ops)
    start, free, pos = {}, [0] * p, [0] * p
    while any(pos[s] < len(order[s]) for s in range(p)):
        for s in range(p):
            if pos[s] == len(order[s]):
                continue
            kind, i = order[s][pos[s]]
            dep = (s - 1, "F", i) if kind == "F" else (s + 1, "B", i)
            if kind == "F" and s == 0 or kind == "B" and s == p - 1 and (s, "F", i) in start:
                ready = 0 if kind == "F" else start[(s, "F", i)] + 1
            elif dep in start:
                ready = start[dep] + 1
            else:
                continue
            start[(s, kind, i)] = max(ready, free[s])
            free[s] = start[(s, kind, i)] + 1
            pos[s] += 1
    return start


P_STAGES, M_MICRO = 4, 8
slots = one_f_one_b(P_STAGES, M_MICRO)
fig, ax = plt.subplots(figsize=(11, 2.6))
for (s, kind, i), t in slots.items():
    ax.broken_barh([(t, 1)], (s - 0.4, 0.8), facecolors="tab:blue" if kind == "F" else "tab:orange")
    ax.text(t + 0.5, s, f"{kind}{i}", ha="center", va="center", fontsize=7, color="white")
ax.set_yticks(range(P_STAGES), [f"stage {s}" for s in range(P_STAGES)])
ax.set_ylim(P_STAGES - 0.5, -0.5)
ax.set_xlabel("time slot")
ax.set_title(f"1F1B, {P_STAGES} stages, {M_MICRO} micro-batches (F forward, B backward)")
total = max(slots.values()) + 1
busy = 2 * M_MICRO
print(f"each stage is busy {busy} of {total} slots: idle/busy = {(total - busy) / busy:.3f}, "
      f"(p-1)/m = {(P_STAGES - 1) / M_MICRO:.3f}")

# %% [markdown]
# > **Common mistakes**
# > - All-reducing the hook's argument: `register_post_accumulate_grad_hook`
# >   passes the parameter; all-reduce `param.grad`.
# > - **Waiting after `optimizer.step()`.** The step then reads gradients whose
# >   all-reduce may still be running: each rank updates with its own partial
# >   gradient, and the replicas drift apart silently. Wait for every handle
# >   *before* the step, as `finish()` does. (A popular article calls such code
# >   "1F1B"; it is neither 1F1B nor correct.)
# > - Indexing `model.parameters()`: it is a generator; take `list(...)` once.
# > - Timing without a barrier, warm-up and the slowest rank: the numbers then
# >   measure who arrived first.
#
# The second mistake, shown: wait after the step instead of before.

# %% tags=["nbval-ignore-output"]
class WaitsTooLate(ddp.Overlapped):
    def finish(self):
        pass  # the handles are waited on only at the next step's start (too late)

    def wrap(self, model):
        model = super().wrap(model)
        model.register_forward_pre_hook(lambda *_: ddp.Overlapped.finish(self))
        return model


late_ok = same_as_one_process(WaitsTooLate)
print("Waiting after optimizer.step(): "
      + ("the weights match one process on this run only because every all-reduce happened "
         "to finish before the step read the gradients; that is a race, not a guarantee."
         if late_ok else
         "the weights differ from one process: the step used gradients not yet averaged."))

# %% [markdown]
# ## Recap
#
# - `async_op=True` returns a Work: issue early, compute, `wait()` before you
#   touch the tensor. Futures (`get_future().then`) run code on completion.
# - Data parallelism by hand: average every gradient over the ranks (divide,
#   then all-reduce) before the optimizer step; check it against one process
#   on the global batch.
# - Overlap: a hook per parameter starts its all-reduce during backward;
#   buckets in reverse order trade α per message against how early the first
#   bucket can leave. torch's DDP is this, with `bucket_cap_mb = 25`.
# - A collective's span on one rank includes waiting for the slowest peer:
#   compare end times.
# - Overlap can hide at most the backward time that remains after each
#   bucket; the last bucket always shows.
# - 1F1B is a pipeline schedule with a bubble of `(p−1)/m`; ZeRO-3 moves
#   1.5× DDP's bytes.
#
# ## Where to go next
#
# - `examples/ddp_overlap.py` runs the same versions under `torchrun` on a real
#   cluster: `torchrun --nproc_per_node=8 examples/ddp_overlap.py --version
#   bucket --bucket-mb 25`.
# - `benchmarks/overlap.py` measures all five versions on the emulated network.
# - Notebook 08 compresses what goes over the wire.

# %%
cluster.shutdown()
