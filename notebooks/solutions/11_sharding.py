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
# # 11 · Sharded data parallelism: ZeRO-2 and ZeRO-3 (FSDP), built and measured
#
# Data parallelism keeps a whole copy of the model on every rank: its
# parameters, its gradients and the optimizer's state. Notebook 10 sharded the
# optimizer state (ZeRO-1). Here the gradients (ZeRO-2) and then the
# parameters themselves (ZeRO-3, which torch calls FSDP, *fully sharded* data
# parallelism) are spread over the ranks, each layer's parameters gathered just
# before that layer needs them and freed right after. You build it small, check
# it against one process and against torch's own `fully_shard`, measure what
# each stage saves in memory and costs in traffic, and watch prefetching hide
# the gathers behind compute.
#
# **You will leave this notebook able to**
# - say, for DDP and ZeRO-1, 2 and 3, what a rank holds and sends per step, in
#   bytes, for float32 training and for the ZeRO paper's mixed precision;
# - write a ZeRO-3 wrapper's forward: all-gather a layer before it runs, free
#   it after, and prefetch the next layer's all-gather;
# - prove a sharded run equal to one process, step by step, and to torch's
#   FSDP2 (`torch.distributed.fsdp.fully_shard`);
# - read a ZeRO-3 timeline and predict what prefetching hides.
#
# The exercise is **Exercise 11.1** (the ZeRO-3 forward). Sources are in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding).

# %%
import dataclasses
import functools
import inspect

import matplotlib.pyplot as plt
import torch

import labsupport as lab
from labsupport import netem, sharding
from labsupport.runtime import emulator, trace
from labsupport.runtime.check.agreement import agreement
from labsupport.runtime.check.sharding import check_zero3_forward, passed
from labsupport.runtime.experiments import ddp_runs
from labsupport.runtime.experiments import sharding_runs as runs
from labsupport.runtime.launch import RankError

# %% [markdown]
# Sizes are small so that the notebook runs in about two minutes on a laptop.
# `FULL_RUN = True` trains 8 blocks of 512 features and times more steps.
#
# The model is a stack of equal **blocks** (a linear layer, then a ReLU),
# trained with AdamW; each block is one **unit** of ZeRO-3: its parameters are
# gathered, used and freed together. Ψ, in the ZeRO paper's notation
# (Rajbhandari et al. 2020), is the number of parameters.

# %%
RANKS = 4
FULL_RUN = False  # True: 8 blocks of 512 features, 5 timed steps
CFG = runs.Blocks(layers=8 if FULL_RUN else 4, hidden=512 if FULL_RUN else 256)
TIMED_STEPS = 5 if FULL_RUN else 2
PSI = CFG.param_count()
print(f"{CFG.layers} blocks of {CFG.hidden} features: Ψ = {PSI:,} parameters "
      f"({4 * PSI / 1e6:.2f} MB in float32), one unit = {PSI // CFG.layers:,} parameters")

# %% [markdown]
# The ranks start on a fast emulated network (`labsupport.netem`); section 5
# slows it down. Each rank computes on one thread, as in notebooks 07 and 10.

# %% tags=["nbval-ignore-output"]
FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
cluster = lab.Cluster(RANKS, network=FAST)
print("threads per rank:", cluster.run(ddp_runs.use_threads)[0])
torch.set_num_threads(1)

# %% [markdown]
# ## 1. What each stage holds and sends, on paper
#
# With AdamW every rank of plain data parallelism holds, per parameter, the
# parameter, its gradient and Adam's two moments. The course trains in
# float32: **4Ψ + 4Ψ + 8Ψ = 16Ψ bytes**. The ZeRO paper counts mixed
# precision: fp16 parameters and gradients (2Ψ + 2Ψ) and an fp32 master copy
# with the two moments (KΨ, K = 12): also 16Ψ, split differently. Each stage
# divides more of it by the p ranks:
#
# | stage | sharded over the ranks | the ZeRO paper's name |
# |---|---|---|
# | DDP | nothing | baseline |
# | ZeRO-1 | optimizer state | P_os |
# | ZeRO-2 | and gradients | P_os+g |
# | ZeRO-3 | and parameters (FSDP) | P_os+g+p |
#
# One source of truth for these numbers, in the teaching core:
# `labsupport/sharding/memory.py` (`model_states`, `step_bytes`).

# %%
print(inspect.getsource(sharding.model_states))

# %%
lab.viz.table(
    [{"stage": sharding.NAMES[s],
      **{f"{prec}\n(bytes/param)": sharding.total(PSI, s, RANKS, prec) / PSI
         for prec in sharding.PRECISIONS},
      "float32 model states\nper rank (MB)": sharding.total(PSI, s, RANKS) / 1e6,
      "collectives per step": " + ".join(f"{n} ({w})" for n, w in sharding.collectives(s)),
      "sent per rank per step\n(× Ψ elements)": sharding.step_bytes(PSI, s, RANKS, 1) / PSI}
     for s in sharding.NAMES],
    formats={"float32 model states\nper rank (MB)": ".2f"},
    title=f"the formulas, p = {RANKS} ranks, Ψ = {PSI:,}")

# %% [markdown]
# Traffic: a ring all-reduce is a reduce-scatter followed by an all-gather
# (notebook 03), each sending (p−1)/p of the buffer per rank. ZeRO-1 and
# ZeRO-2 send those same two halves, only at other moments. ZeRO-3 has freed
# the parameters after forward, so backward must all-gather them again: three
# halves instead of two, **1.5× DDP's traffic** (the paper's §7), to cut the
# model states by p.

# %% [markdown]
# ## 2. ZeRO-3, built: gather, compute, free
#
# `labsupport/sharding/zero.py` is the whole of it. Each unit's parameters
# become views of one flat buffer (`FlatUnit`), padded to a multiple of p; a
# rank keeps only its 1/p slice, the **shard**, as an `nn.Parameter`, and the
# optimizer steps the shards. The buffer's memory exists only while the unit
# is gathered: `unit.free()` gives it back (the storage shrinks to 0 bytes, as
# torch's FSDP2 does it) and `unit.gather()` all-gathers the shards into it
# again. A unit has four moments; here are the backward two:

# %%
print(inspect.getsource(sharding.ZeRO3.before_backward))
print(inspect.getsource(sharding.ZeRO3.after_backward))

# %% [markdown]
# After a unit's backward its gradients are averaged by a reduce-scatter (each
# rank receives the mean of its own shard only: ZeRO-2's saving) and its
# parameters are freed again. The reduce-scatters are asynchronous; a callback
# queued with the autograd engine waits for them when backward ends, so
# `backward()` returns with every shard's `.grad` holding its mean, as with
# notebook 07's DDP.
#
# **Prefetching.** A unit cannot compute before its parameters arrive. Waiting
# for each all-gather exposes all of them; issuing the *next* unit's
# all-gather as this unit starts lets it travel while this unit computes. In
# backward the next unit is the one before, and the last unit of forward is
# the first of backward: with prefetch it is simply not freed in between
# (torch's FSDP2 does the same for its root module).
#
# **Exercise 11.1.** Complete the forward's two moments:
#
# - `before_forward(k)`: unit `k`'s parameters must be here when it runs
#   (`self.units[k].gather(async_op=False)` issues the all-gather if none is in
#   flight, and waits for it); then, if `self.prefetch`, issue unit `k + 1`'s
#   all-gather **without waiting** (`async_op=True`);
# - `after_forward(k)`: free unit `k` (`self.units[k].free()`), except the last
#   unit when prefetching.
#
# The grader starts 4 ranks of its own on an emulated network where one
# unit's all-gather takes about half of a unit's forward, and trains with your
# class in float64. It checks the losses and weights against one process,
# which units hold memory when forward and backward return, and, **by time**,
# that each next all-gather is issued before this unit's compute ends, is not
# waited for at once, and that the forward's time shows them hidden.

# %%
# Exercise 11.1: ZeRO-3's forward: gather, free, prefetch
class MyZeRO3(sharding.ZeRO3):
    def before_forward(self, k):
        """Unit k is about to run: its parameters must be here; send for unit k + 1's."""
        # BEGIN SOLUTION
        self.units[k].gather(async_op=False)  # waits for a prefetch in flight
        if self.prefetch and k + 1 < len(self.units):
            self.units[k + 1].gather(async_op=True)  # travels while unit k computes
        # END SOLUTION

    def after_forward(self, k):
        """Unit k has run: free its parameters (backward gathers them again)."""
        # BEGIN SOLUTION
        if not (self.prefetch and k == len(self.units) - 1):  # backward needs the last first
            self.units[k].free()
        # END SOLUTION


# %%
check_zero3_forward(MyZeRO3)

# %% [markdown]
# The rest of the notebook uses your `MyZeRO3` once it passes, and the
# library's `sharding.ZeRO3` until then (the printouts say which).

# %%
ZERO3 = MyZeRO3 if passed(MyZeRO3) else sharding.ZeRO3
ZERO3_NAME = "MyZeRO3 (yours)" if passed(MyZeRO3) else "sharding.ZeRO3 (library)"
print("ZeRO-3 below:", ZERO3_NAME)
VERSIONS = {"ddp": "ddp", "zero1": "zero1", "zero2": "zero2", "zero3": ZERO3,
            "zero3 no prefetch": functools.partial(ZERO3, prefetch=False)}

# %% [markdown]
# ## 3. Equal to one process, and to torch's FSDP2
#
# Every version trains three steps in float64 on the 4 ranks, each rank
# building its model from a seed of its own (the wrappers broadcast rank 0's
# weights), next to one process on the whole batch. After **every** step each
# rank gathers every weight and compares it, and the loss, with one process's.
# The verdicts use the graders' float64 tolerances.

# %%
CHECK = dataclasses.replace(CFG, dtype=torch.float64)
ONE = runs.baseline(CHECK, 3)


def verdicts(name, out, reference):
    """A table row: the largest loss and weight differences, in words, over ranks and steps."""
    gaps = [runs.largest_gaps(r, reference) for r in out]
    return {"version": name,
            "losses": agreement(max(g[0] for g in gaps), torch.float64),
            "weights": agreement(max(g[1] for g in gaps), torch.float64, relative=False)}


lab.viz.table([verdicts(kind, cluster.run(runs.train, version, CHECK, 3), ONE)
               for kind, version in VERSIONS.items()],
              title=f"{RANKS} ranks against one process, 3 steps, float64")

# %% [markdown]
# **torch's own.** FSDP2 is `torch.distributed.fsdp.fully_shard`: applied to
# each block and then to the root, it replaces each parameter by a `DTensor`
# sharded on its first dimension over a `DeviceMesh`, and all-gathers and
# reduce-scatters around each block as ours does. In torch 2.13 it runs on
# the CPU, over a CPU `DeviceMesh` and plain gloo. (Unlike torch's DDP it does
# not broadcast rank 0's weights: `runs.torch_fsdp2` does that first.)

# %%
print(inspect.getsource(runs.torch_fsdp2))

# %% [markdown]
# Two ranks on plain gloo, no emulated network: torch's FSDP2 and ours, each
# against one process and against each other, after every step.

# %%
with lab.Cluster(2) as gloo:
    theirs = gloo.run(runs.train, "torch fsdp2", CHECK, 3)
    ours = gloo.run(runs.train, ZERO3, CHECK, 3)
lab.viz.table([verdicts("torch fully_shard vs one process", theirs, ONE),
               verdicts(f"{ZERO3_NAME} vs one process", ours, ONE),
               verdicts(f"{ZERO3_NAME} vs torch fully_shard", ours, theirs[0])],
              title="2 ranks on plain gloo, 3 steps, float64")

# %% [markdown]
# Does torch's FSDP2 also run on the course's emulated network? Try it:

# %% tags=["nbval-ignore-output"]
with lab.Cluster(2, network=FAST) as emulated:
    try:
        emulated.run(runs.train, "torch fsdp2", CHECK, 1)
        TORCH_ON_NETEM = "it runs"
    except RankError as err:
        TORCH_ON_NETEM = f"it does not: {str(err).splitlines()[0]}"
print("torch's fully_shard on the emulated network:", TORCH_ON_NETEM)

# %% [markdown]
# With torch 2.13 the cell above ends in an error, and this is why:
# `fully_shard` needs a `DeviceMesh`, and the mesh asks its process group for
# its name, which torch gives to the groups of its own backends only; the
# emulated group, written in Python, has none. (The course's tests fail the
# day a torch release changes that.) So torch's FSDP2 is checked for equality
# on plain gloo, and the course's versions are timed on the emulated network,
# where the clock can be trusted.

# %% [markdown]
# ## 4. Memory per rank and bytes per step, measured
#
# Each rank counts what it holds once a step is done (after `optimizer.step()`,
# gradients still there: `ddp.model_states`, each storage once; a ZeRO-3 unit's
# freed buffer holds nothing) and the bytes it sent during that step
# (`emulator.traffic()`), in float32. Measured next to `sharding.model_states`
# and `sharding.step_bytes`:

# %%
STAGE = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3 no prefetch": 3, "zero3": 3}
measured = {k: cluster.run(runs.memory_and_traffic, VERSIONS[k], CFG)[0] for k in STAGE}
rows = []
for kind, m in measured.items():
    formula = sharding.model_states(PSI, STAGE[kind], RANKS)
    rows.append({"version": kind,
                 **{f"{part}\n(bytes/param)": m["memory"][part] / PSI for part in formula},
                 "formula\n(bytes/param)": sharding.total(PSI, STAGE[kind], RANKS) / PSI,
                 "MB sent\nper step": m["bytes"] / 1e6,
                 "formula\n(MB)": sharding.step_bytes(PSI, STAGE[kind], RANKS) / 1e6,
                 "× DDP": m["bytes"] / measured["ddp"]["bytes"]})
lab.viz.table(rows, formats={"× DDP": ".3f"}, title=f"rank 0, float32 AdamW, p = {RANKS}")

# %% [markdown]
# Where do measurement and formula part? Computed, part by part (a difference
# under 0.1 % is AdamW's step counters):

# %%
for kind, m in measured.items():
    formula = sharding.model_states(PSI, STAGE[kind], RANKS)
    off = {part: m["memory"][part] for part in formula
           if abs(m["memory"][part] - formula[part]) > 1e-3 * formula[part]}
    sent = sharding.step_bytes(PSI, STAGE[kind], RANKS)
    words = ", ".join(f"{part} {v / PSI:.2f} bytes/param (formula {formula[part] / PSI:.2f})"
                      for part, v in off.items())
    traffic = ("traffic as the formula" if abs(m["bytes"] - sent) <= 1e-3 * sent else
               f"traffic {m['bytes'] / sent:.3f}× the formula")
    print(f"{kind:>17}: {'memory as the formula' if not off else words}; {traffic}")

# %% [markdown]
# Two departures, both understood. **ZeRO-1** (notebook 10's `ddp.ZeRO1`)
# keeps the full local gradients *and* the reduce-scatter's output, a second
# gradient shard: 4Ψ + 4Ψ/p of gradients where the paper counts 4Ψ. **ZeRO-3
# with prefetch** keeps its last unit gathered from forward to backward, so
# backward gathers one unit fewer: (p−1)/p of one unit's bytes less than
# 3 halves. Without prefetch it is exactly **1.5× DDP**:

# %%
unit_bytes = 4 * PSI // CFG.layers
saved = (RANKS - 1) / RANKS * unit_bytes
ratio = measured["zero3 no prefetch"]["bytes"] / measured["ddp"]["bytes"]
print(f"ZeRO-3 without prefetch: {ratio:.3f}× DDP's bytes, measured")
print("ZeRO-3 with prefetch sends one unit's all-gather less: "
      f"{(sharding.step_bytes(PSI, 3, RANKS) - saved) / 1e6:.4f} MB predicted, "
      f"{measured['zero3']['bytes'] / 1e6:.4f} MB measured")

# %% [markdown]
# ## 5. A ZeRO-3 timeline, with and without prefetch
#
# Timing uses emulated compute, as notebooks 07 and 10 do: each block also
# stands for 5 ms of an accelerator's forward (twice that backward). The
# network is slowed down until one unit's all-gather takes a little over half
# a block's forward: 100 µs per message, and a bandwidth at which each of the
# ring's p−1 steps (a shard of one unit) takes 0.8 ms more; one NIC per rank.

# %% tags=["nbval-ignore-output"]
TIMED = dataclasses.replace(CFG, compute_ms=5 * CFG.layers)
SLOW = netem.Network(inter=netem.Link(latency=100e-6, bandwidth=unit_bytes / RANKS / 0.8e-3),
                     ranks_per_node=1)
_ = cluster.run(emulator.set_network, SLOW)
per_block = cluster.run(runs.time_compute, TIMED)[0]
gather = netem.model_time("all_gather", "ring", unit_bytes, RANKS, SLOW)
scatter = netem.model_time("reduce_scatter", "ring", unit_bytes, RANKS, SLOW)
print(f"one block: forward {per_block['forward'] * 1e3:.2f} ms, backward "
      f"{per_block['backward'] * 1e3:.2f} ms (measured, no communication)")
print(f"network: {SLOW}")
print(f"one unit ({unit_bytes / 1e3:.0f} kB): all-gather {gather * 1e3:.2f} ms, "
      f"reduce-scatter {scatter * 1e3:.2f} ms (the link model)")

# %% [markdown]
# `labsupport/sharding/predict.py` plays a step on paper: one link, one
# collective at a time; a unit computes once its parameters are here.

# %%
print(inspect.getsource(sharding.zero3_step))

# %% tags=["nbval-ignore-output"]
COLOURS = {"forward": "0.8", "backward": "0.6", "optimizer": "tab:green",
           "unit forward": "tab:blue", "unit backward": "tab:orange",
           "all_gather_into_tensor": "tab:brown", "reduce_scatter_tensor": "tab:purple"}
timed, model = {}, {}
for kind, prefetch in (("zero3 no prefetch", False), ("zero3", True)):
    timed[kind] = cluster.run(runs.time_steps, VERSIONS[kind], TIMED, TIMED_STEPS, 1)
    model[kind] = sharding.zero3_step(CFG.layers, per_block["forward"], per_block["backward"],
                                      gather, scatter, prefetch)


def first_step(outs, ranks=(0, 1)):
    """Each rank's spans from its first timed forward to its second."""
    spans = trace.merge(o["spans"] for o in outs)
    keep = []
    for r in ranks:
        starts = sorted(s.start_ns for s in spans if s.name == "forward" and s.rank == r)
        end = starts[1] if len(starts) > 1 else float("inf")
        keep += [s for s in spans if s.rank == r and starts[0] <= s.start_ns < end]
    return keep


fig, axes = plt.subplots(2, 1, figsize=(11, 6.5))
for ax, kind in zip(axes, timed, strict=True):
    lab.viz.plot_timeline(first_step(timed[kind]), ax=ax, colors=COLOURS, legend=ax is axes[0])
    ax.set_title(f"{kind}: step {timed[kind][0]['median'] * 1e3:.1f} ms (slowest rank), ranks 0-1")
right = max(ax.get_xlim()[1] for ax in axes)
for ax in axes:
    ax.set_xlim(0, right)  # one time scale for both
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the `units` lanes: each block's forward (blue) and backward (orange),
# which start once the wrapper has the block's parameters. Without prefetch,
# every brown all-gather sits in a gap between two blocks: the block waits for
# it. In backward each all-gather also queues behind the purple
# reduce-scatter of the block before it, on the same link. With prefetch the
# next block's all-gather travels during this block's compute: the blocks run
# back to back, and only the first block's all-gather is left in the open.
#
# Forward plus backward, measured (the spans' median, slowest rank) against
# the model, and what prefetching hides:

# %% tags=["nbval-ignore-output"]
def compute_and_comm(outs):
    """Median seconds of forward + backward (the optimizer's step left out), slowest rank."""
    per_rank = []
    for o in outs:
        fw = sorted(s.duration_ns for s in o["spans"] if s.name == "forward")
        bw = sorted(s.duration_ns for s in o["spans"] if s.name == "backward")
        per_rank.append((fw[len(fw) // 2] + bw[len(bw) // 2]) / 1e9)
    return max(per_rank)


fb = {kind: compute_and_comm(outs) for kind, outs in timed.items()}
for kind in timed:
    print(f"{kind:>17}: forward + backward {fb[kind] * 1e3:6.1f} ms measured, "
          f"{model[kind] * 1e3:6.1f} ms by the model ({fb[kind] / model[kind]:.2f}x)")
hidden_model = sharding.hidden_by_prefetch(CFG.layers, per_block["forward"],
                                           per_block["backward"], gather, scatter)
hidden = fb["zero3 no prefetch"] - fb["zero3"]
print(f"prefetch hides {hidden * 1e3:.1f} ms per step measured, {hidden_model * 1e3:.1f} ms "
      "predicted:")
print(f"without it {2 * CFG.layers - 1} all-gathers of {gather * 1e3:.2f} ms wait in the open, "
      "and in backward each also queues behind a reduce-scatter")

# %% [markdown]
# The model needs nothing but the compute measured without communication and
# the link model's time of one all-gather and one reduce-scatter; what it
# leaves out (the hooks, the copies into the flat buffers) is why measured
# times sit a little above it. Prefetch hides at most one all-gather per unit
# and pass, so it pays only while a unit's all-gather is no longer than its
# compute: on a slower network, or with smaller units, the gathers are exposed
# again, prefetch or not.

# %% [markdown]
# ## 6. The same ideas in torch's FSDP2
#
# | here | torch 2.13 |
# |---|---|
# | `ZeRO3(model)`, one unit per block | `fully_shard(block)` for each block, then `fully_shard(model)` |
# | the shards, `model.parameters()` | `DTensor` parameters, `Shard(0)` over the mesh |
# | `ZeRO2(model)` | `fully_shard(..., reshard_after_forward=False)`: parameters kept from forward to backward |
# | prefetch: the next unit | by default (backward: the next module in reverse post-forward order); explicit with `set_modules_to_forward_prefetch` and `set_modules_to_backward_prefetch` |
# | the last unit kept for backward | the root's `reshard_after_forward` is `False` by default |
# | float32 everywhere | `mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16)`: compute and the all-gathers in bf16, half the bytes; the shards stay float32 |
#
# On a cluster the same `fully_shard` runs with the mesh on `"cuda"` (NCCL) or
# `"npu"` (HCCL through torch_npu), under `torchrun`.

# %% [markdown]
# > **Common mistakes**
# > - **Gathering and waiting for the next unit at once.** It is issued early
# >   but nothing overlaps it: the timeline shows the same gaps as no prefetch.
# > - **Never freeing.** The run is correct and its traffic is ZeRO-2's, but
# >   every rank ends up holding the whole model: no memory was saved.
# > - **Freeing the last unit, then gathering it first thing in backward.**
# >   One all-gather more per step, exposed.
# > - **Comparing only losses.** A wrong reduce-scatter can leave the loss
# >   close and the weights apart: compare every weight after every step.

# %% [markdown]
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all):
#
# - `labsupport/sharding/memory.py` (`model_states`, `step_bytes`): what each
#   stage holds and sends, in float32 and in the paper's mixed precision.
# - `labsupport/sharding/zero.py` (`ZeRO3`, `FlatUnit`): the four moments of a
#   unit; `ZeRO2`, the same without freeing.
# - `labsupport/sharding/predict.py` (`zero3_step`): a step on one link, with
#   and without prefetch.

# %% [markdown]
# ## Recap
#
# - Model states are 16Ψ bytes per rank under DDP with AdamW (float32, or the
#   paper's mixed precision); ZeRO-1, 2 and 3 divide the optimizer state, then
#   the gradients, then the parameters by p: ZeRO-3 holds 16Ψ/p.
# - ZeRO-1 and ZeRO-2 send DDP's bytes (a reduce-scatter and an all-gather);
#   ZeRO-3 one all-gather more, 1.5× DDP's, measured.
# - ZeRO-3 gathers each unit before its forward and its backward and frees it
#   after; prefetching the next unit's all-gather hides it behind this unit's
#   compute, as long as it is the shorter of the two.
# - Built small, it equals one process and torch's `fully_shard` weight for
#   weight, at every step.
#
# ## Where to go next
#
# - Run `fully_shard` under `torchrun` on a real cluster with NCCL or HCCL,
#   and compare its traffic per step with `sharding.step_bytes`.
# - Notebook 12 splits the model itself: tensor, sequence, pipeline and
#   expert parallelism, and layouts at scale.

# %%
cluster.shutdown()
