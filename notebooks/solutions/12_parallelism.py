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
# # 12 · Model parallelism and layouts at scale
#
# Data parallelism (notebooks 07 and 10) gives every rank the whole model. A
# model too large for one device is cut: its matrices across the NPUs of a
# server (**tensor parallelism**), its activations along the sequence
# (**sequence parallelism**), its layers into stages (**pipeline
# parallelism**), its experts across ranks (**expert parallelism**). Each cut
# has its own collectives, and each collective its own place in the network.
# This notebook builds each one small, checks it against one process and
# against torch's own, measures it on the emulated network, and then asks the
# question an engineer faces with 4096 NPUs: which layout?
#
# **You will leave this notebook able to**
# - write Megatron's column- then row-parallel MLP with its two operators f and
#   g (one all-reduce forward, one backward), and its sequence-parallel twin
#   (a reduce-scatter and an all-gather instead: the same bytes);
# - say, from a measurement on a two-level network, why tensor parallelism lives
#   inside a server;
# - run a pipeline of stages that exchange activations and gradients by
#   send/recv under GPipe and 1F1B, measure its bubble against (p−1)/m, and
#   show that 1F1B saves activation memory, not bubble;
# - dispatch and combine an MoE layer's tokens with `all_to_all_single` and
#   uneven splits, and cost a hot expert;
# - compute, for a named model on Atlas 800T A2 and DGX H100 clusters up to
#   4096 NPUs, the bytes and time of every collective class of every layout,
#   and pick the layout.
#
# The exercises are **Exercise 12.1** (the row-parallel layer's all-reduce) and
# **Exercise 12.2** (a layout and its communication time). Sources are in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding).

# %%
import inspect

import matplotlib.pyplot as plt
import torch
import torch.distributed as dist
from IPython.display import display
from torch import nn

import labsupport as lab
from labsupport import netem, parallel, topology
from labsupport.runtime import emulator
from labsupport.runtime.bench.timing import time_iterations
from labsupport.runtime.check.agreement import agreement
from labsupport.runtime.check.parallel import check_layout, check_row_parallel
from labsupport.runtime.viz import table
from labsupport.units import format_size, format_time

# %load_ext labsupport

# %% [markdown]
# Sizes are small so that the notebook runs in about two minutes on a laptop.
# `FULL_RUN = True` adds more micro-batch counts to the pipeline sweep.
#
# The ranks run on an **emulated two-level network** (notebook 05): two nodes
# of two ranks, a fast mesh inside a node, one slow NIC per rank between
# nodes. The times below are the emulated links' (the same on every laptop);
# the data and results are real. Each rank computes on one thread, so that the
# emulated clock charges all of its CPU work (notebook 07).

# %%
RANKS = 4
FULL_RUN = False  # True: the pipeline sweep over more micro-batch counts
NET = netem.Network(
    intra=netem.Link(latency=50e-6, bandwidth=1e9),  # inside a node
    inter=netem.Link(latency=500e-6, bandwidth=50e6),  # between nodes
    ranks_per_node=2,
)
print(NET)

# %% tags=["nbval-ignore-output"]
cluster = lab.Cluster(RANKS, network=NET)
_ = cluster.run(torch.set_num_threads, 1)

# %% [markdown]
# ## 1. Tensor parallelism: Megatron's f and g
#
# A transformer's MLP is Y = GeLU(X·A)·B, with A of h × 4h and B of 4h × h.
# Megatron-LM (Shoeybi et al. 2019, §3) splits A **by columns** over the t
# ranks of a tensor-parallel group and B **by rows**. Rank i computes
# GeLU(X·Aᵢ)·Bᵢ: the GeLU applies column by column, so no communication is
# needed between the two products, and the t results are **partial sums** of
# Y. One all-reduce adds them.
#
# Backward mirrors it. The gradient flowing back into X is also a sum over the
# ranks of partial gradients, so it needs one all-reduce too. Megatron writes
# the two as a pair of conjugate operators:
#
# | operator | forward | backward | where |
# |---|---|---|---|
# | **f** | identity | all-reduce | entering the block |
# | **g** | all-reduce | identity | leaving the block (the row-parallel layer) |
#
# In `labsupport.parallel.tensor` each is an `autograd.Function` of a few lines:

# %%
print(inspect.getsource(parallel.tensor._F))
print(inspect.getsource(parallel.tensor.ParallelMLP.forward))

# %% [markdown]
# **Predict, then run.** Per MLP block and per micro-batch, how many all-reduces
# does a rank issue in forward, and how many in backward? How large is each?
#
# The cell below runs the split MLP on the 4 ranks and the dense one on each
# rank, and compares the output and every gradient. `emulator.recording()`
# lists the collectives each rank issued.

# %%
H, TOKENS = 64, 32


def dense_mlp():
    torch.manual_seed(0)
    return nn.Linear(H, 4 * H), nn.Linear(4 * H, H)


def tp_against_dense(sequence=False):
    """On one rank: the largest relative difference from the dense MLP, and the collectives."""
    fc1, fc2 = dense_mlp()
    torch.manual_seed(1)
    x = torch.randn(TOKENS, H)
    xr = x.clone().requires_grad_(True)
    ref = fc2(nn.functional.gelu(fc1(xr)))
    ref.pow(2).sum().backward()
    rank, t = dist.get_rank(), dist.get_world_size()
    mlp = (parallel.SequenceParallelMLP if sequence else parallel.ParallelMLP)(fc1, fc2)
    mine = (x.chunk(t)[rank] if sequence else x).clone().requires_grad_(True)
    with emulator.recording() as forward:
        out = mlp(mine)
    with emulator.recording() as backward:
        out.pow(2).sum().backward()
    want = ref.chunk(t)[rank] if sequence else ref
    pairs = [(out, want), (mlp.w1.grad, fc1.weight.grad.chunk(t, 0)[rank]),
             (mlp.w2.grad, fc2.weight.grad.chunk(t, 1)[rank])]  # fmt: skip
    diff = max(((a - b).abs().max() / b.abs().max()).item() for a, b in pairs)
    return diff, forward, backward


runs = cluster.run(tp_against_dense)
print("split MLP against the dense one (output, both weight gradients):"
      "\n  " + agreement(max(d for d, _, _ in runs)))  # fmt: skip
_, fwd, bwd = runs[0]
print("rank 0, forward: ", [(name, format_size(n)) for name, _, n in fwd])
print("rank 0, backward:", [(name, format_size(n)) for name, _, n in bwd])
print(f"one activation tensor: {TOKENS} tokens x {H} x 4 bytes = {format_size(TOKENS * H * 4)}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# One all-reduce forward (g) and one backward (f), each of a whole activation
# tensor (tokens × h values), whatever t is. A transformer layer has two such
# blocks (attention is split the same way, by heads), so **four all-reduces of
# the activations per layer per micro-batch**: that count is what section 6
# multiplies by thousands.
# </details>
#
# **Exercise 12.1.** Write g, the all-reduce at the end of the row-parallel
# layer, as an `autograd.Function`: forward all-reduces its input over the
# default group and returns it; backward passes the gradient through. The
# grader puts your g at the end of the split MLP (keeping the course's f) on
# every rank and compares the output and the gradients with one process on
# the dense MLP.


# %%
# Exercise 12.1: the row-parallel layer's all-reduce (Megatron's g)
class MyG(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # BEGIN SOLUTION
        x = x.clone()  # all_reduce works in place; do not modify autograd's input
        dist.all_reduce(x)
        return x
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION
        return grad  # every rank already holds the whole gradient of Y
        # END SOLUTION


# %%
check_row_parallel(MyG)

# %% [markdown]
# ### torch's own: `parallelize_module`
#
# torch ships the same split as `torch.distributed.tensor.parallel`:
# `ColwiseParallel` for the first linear layer and `RowwiseParallel` for the
# second, over a `DeviceMesh`. It runs on plain gloo on a CPU mesh (checked
# here with torch 2.13). It does **not** run on the course's emulated backend:
# `DeviceMesh` needs a named process group, which the emulated one does not
# register. So this comparison runs on a second, plain group of 4 ranks.


# %%
def ours_against_torch():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    fc1, fc2 = dense_mlp()
    seq = nn.Sequential(nn.Linear(H, 4 * H), nn.GELU(), nn.Linear(4 * H, H))
    seq[0].load_state_dict(fc1.state_dict())
    seq[2].load_state_dict(fc2.state_dict())
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    theirs = parallelize_module(seq, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    ours = parallel.ParallelMLP(fc1, fc2)
    torch.manual_seed(1)
    x = torch.randn(TOKENS, H)
    a, b = ours(x), theirs(x)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    w1 = theirs[0].weight.grad.to_local()  # a DTensor: this rank's rows
    return max(((a - b).abs().max() / b.abs().max()).item(),
               ((ours.w1.grad - w1).abs().max() / w1.abs().max()).item())  # fmt: skip


with lab.Cluster(RANKS) as plain:  # plain gloo, no emulated network
    torch_tp = plain.run(ours_against_torch)
print("labsupport.parallel.ParallelMLP against torch's ColwiseParallel + RowwiseParallel:"
      "\n  " + agreement(max(torch_tp)))  # fmt: skip

# %% [markdown]
# ## 2. Sequence parallelism: the same bytes, a quarter of the activations
#
# Outside the MLP and attention blocks (layer norm, dropout, the residual) the
# t ranks of a tensor-parallel group hold the **same** activations: t copies.
# Korthikanti et al. (2022, §4.2.2) cut them along the sequence instead, so
# each rank holds 1/t. Entering a block, an **all-gather** along the sequence
# rebuilds the whole input; leaving it, a **reduce-scatter** sums the partial
# results and leaves each rank its part of the sequence. An all-reduce *is* a
# reduce-scatter followed by an all-gather (notebook 03): the bytes on the wire
# are the same, the activation memory outside the blocks is divided by t.

# %%
runs = cluster.run(tp_against_dense, True)
print("sequence-parallel MLP against the dense one:\n  " + agreement(max(d for d, _, _ in runs)))
_, fwd, bwd = runs[0]
print("rank 0, forward: ", [(name, format_size(n)) for name, _, n in fwd])
print("rank 0, backward:", [(name, format_size(n)) for name, _, n in bwd])
p = RANKS
ring = {"all-reduce": 2 * (p - 1) / p, "all-gather + reduce-scatter": 2 * (p - 1) / p}
print("bytes each rank sends per block (ring, times the activation):", ring)
print(f"activations each rank holds outside the block: {TOKENS // p} of {TOKENS} tokens")

# %% [markdown]
# ## 3. Why tensor parallelism lives inside a server
#
# Four all-reduces of the activations per layer per micro-batch, each on the
# critical path (the next layer needs the sum): tensor parallelism's traffic
# is large and cannot hide. On the emulated two-level network, the same split
# MLP, forward and backward, in a tensor-parallel group of 2 **inside** a node
# (ranks 0, 1) and **across** the nodes (ranks 0, 2). Every rank creates
# every group (notebook 02).


# %%
def tp_step_time(members_of):
    """(step, its two all-reduces alone): seconds of a split MLP's forward + backward."""
    groups = [dist.new_group(m) for m in members_of]
    mine = next(g for g, m in zip(groups, members_of, strict=True) if dist.get_rank() in m)
    fc1, fc2 = dense_mlp()
    mlp = parallel.ParallelMLP(fc1, fc2, group=mine)
    x = torch.randn(TOKENS, H, requires_grad=True)  # as the output of earlier layers is
    act = torch.randn(TOKENS, H)
    step = time_iterations(lambda i: mlp(x).sum().backward(), 3).median
    one = time_iterations(lambda i: dist.all_reduce(act, group=mine), 3).median
    return step, 2 * one  # one all-reduce forward (g), one backward (f)


INSIDE, ACROSS = [[0, 1], [2, 3]], [[0, 2], [1, 3]]
step_in, comm_in = cluster.run(tp_step_time, INSIDE)[0]
step_across, comm_across = cluster.run(tp_step_time, ACROSS)[0]

# the link model: two ring all-reduces of the activations on 2 ranks (2 steps of half each)
act = TOKENS * H * 4
model = {name: 2 * 2 * (link.latency + act / 2 / link.bandwidth)
         for name, link in (("inside", NET.intra), ("across", NET.inter))}  # fmt: skip

# %% tags=["nbval-ignore-output"]
print(
    f"TP group inside a node:  step {format_time(step_in)}, its two all-reduces alone "
    f"{format_time(comm_in)} (link model {format_time(model['inside'])})"
)
print(
    f"TP group across nodes:   step {format_time(step_across)}, its two all-reduces alone "
    f"{format_time(comm_across)} (link model {format_time(model['across'])})"
)

# %%
print(f"the all-reduces cost over 4x more across nodes than inside: {comm_across > 4 * comm_in}")
print(f"the whole step is over 1.5x slower across: {step_across > 1.5 * step_in}")

# %% [markdown]
# The measured all-reduce times sit near the link model's, which leaves out
# the additions (done by your CPU: the γ of notebook 04). Across the nodes
# every one of those all-reduces pays the slow link's latency
# and bandwidth, and nothing else runs meanwhile. On a real server the ratio
# is what HCCS (Atlas 800T A2) or NVLink (DGX H100) gives over the NICs: an
# order of magnitude or more. So the tensor-parallel group is the server, or
# part of it; section 6 computes what happens at scale when it is not.
#
# ## 4. Pipeline parallelism: stages, send/recv, and the bubble
#
# Pipeline parallelism gives each of p ranks a **stage** (a run of consecutive
# layers) and cuts the batch into m **micro-batches**. A stage receives a
# micro-batch's activations from the previous stage (`dist.recv`), runs its
# layers, and sends its output on (`dist.isend`); in backward the gradients go
# the other way. Nothing else crosses between stages: point-to-point, one
# activation tensor per micro-batch per boundary.
#
# Two schedules (what each stage does, in order):
#
# - **GPipe** (Huang et al. 2019): every forward, then every backward. A stage
#   holds the activations of all m micro-batches.
# - **1F1B** (PipeDream-Flush, Narayanan et al. 2021, §2.2): a few forwards to
#   fill the pipe, then one forward, one backward, ... Stage s holds at most
#   p − s micro-batches' activations.

# %%
for name, build in parallel.SCHEDULES.items():
    print(f"{name:5s} stage 0 of 4, 8 micro-batches:",
          " ".join(f"{k}{i}" for k, i in build(0, 4, 8)))  # fmt: skip

# %% [markdown]
# Both flush at the end of the step, so the weights stay consistent. Both wait
# while the pipe fills and drains: stage s waits for its first micro-batch,
# and for the last backward to come back. That idle time, the **bubble**, is
# (p − 1) forward-and-backward slots against m slots of work:
#
# $$ \text{bubble} = \frac{p-1}{m} $$
#
# for GPipe and for 1F1B alike (Narayanan et al. 2021, §2.2.1).
#
# **Predict, then run.** With p = 4 stages, which of GPipe and 1F1B has the
# smaller bubble for m = 8? Which holds fewer activations on stage 0?
#
# First the pipeline is checked against one process on the whole batch
# (losses and every gradient), then timed with **emulated compute** (each
# forward 10 ms, each backward 20 ms: `emulator.compute`, notebook 07), on the
# emulated network.

# %%
T_FWD, T_BWD = 10e-3, 20e-3
MICRO_ROWS = 2


def stage_layers(seed=0):
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(H, H), nn.Tanh()) for _ in range(dist.get_world_size())]


def pipeline_run(schedule, micro, timed=True):
    """On one stage: (relative difference from one process, seconds, peak activations held)."""
    rank, stages = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    x, y = torch.randn(micro * MICRO_ROWS, H), torch.randn(micro * MICRO_ROWS, H)
    whole = nn.Sequential(*stage_layers())
    nn.functional.mse_loss(whole(x), y).backward()
    layers = stage_layers()
    actions = parallel.SCHEDULES[schedule](rank, stages, micro)
    work = {"F": T_FWD, "B": T_BWD}
    out = {}

    def step(i):
        out["peak"] = parallel.run_stage(
            layers[rank], actions, (MICRO_ROWS, H), x.chunk(micro), y.chunk(micro),
            nn.functional.mse_loss, work=lambda kind: emulator.compute(work[kind]),
        )[1]  # fmt: skip

    seconds = time_iterations(step, 1, warmup=0).median
    # one step from zero gradients: compare with the whole model's
    got, want = layers[rank][0].weight.grad, whole[rank][0].weight.grad
    return ((got - want).abs().max() / want.abs().max()).item(), seconds, out["peak"]


check = {s: cluster.run(pipeline_run, s, 8) for s in parallel.SCHEDULES}
print("pipeline against one process (every stage's gradients):"
      "\n  " + agreement(max(d for runs in check.values() for d, _, _ in runs)))  # fmt: skip
for s, runs in check.items():
    print(f"{s:5s} activations held at once, stage 0..3:", [peak for _, _, peak in runs])

# %% [markdown]
# Now the bubble, measured: the step time T against the work of one stage,
# m·(t_f + t_b), for several m. The formula ignores the sends; the paper
# timeline (`parallel.timeline`) adds one send per hop, at the slowest link's
# price.

# %%
MICROS = [4, 8, 16, 32] if FULL_RUN else [4, 8, 16]
hop = NET.inter.latency + MICRO_ROWS * H * 4 / NET.inter.bandwidth  # the slowest hop
rows = []
for micro in MICROS:
    for s in parallel.SCHEDULES:
        seconds = max(t for _, t, _ in cluster.run(pipeline_run, s, micro))
        ideal = micro * (T_FWD + T_BWD)
        paper = parallel.timeline(s, RANKS, micro, T_FWD, T_BWD, hop)
        rows.append({"schedule": s, "m": micro, "measured": seconds / ideal - 1,
                     "(p-1)/m": parallel.bubble(RANKS, micro),
                     "timeline": max(e for _, e in paper.values()) / ideal - 1})  # fmt: skip

# %% tags=["nbval-ignore-output"]
table(rows, formats={c: ".3f" for c in ("measured", "(p-1)/m", "timeline")},
      title="pipeline bubble: idle time / useful time, 4 stages")  # fmt: skip

# %%
close = all(abs(r["measured"] - r["timeline"]) < 0.05 for r in rows)
above = all(r["measured"] >= r["(p-1)/m"] for r in rows)
pairs = zip(rows[::2], rows[1::2], strict=True)  # GPipe and 1F1B at the same m
same = all(abs(a["measured"] - b["measured"]) < 0.05 for a, b in pairs)
shrinks = rows[-1]["measured"] < rows[0]["measured"] / 2
print(f"measured bubble at least (p-1)/m at every m: {above}")
print(f"measured bubble within 0.05 of the timeline's (sends included): {close}")
print(f"GPipe's bubble equal to 1F1B's (within 0.05) at every m: {same}")
print(f"the bubble shrinks as m grows (m={MICROS[-1]} under half of m={MICROS[0]}): {shrinks}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# The same bubble, (p − 1)/m plus a little for the sends between stages: 1F1B
# does not fill the pipe faster. What it changes is memory: GPipe's stage
# holds all m micro-batches' activations before the first backward frees any;
# 1F1B's stage s holds at most p − s, whatever m. That is why m can be made
# large (a small bubble) under 1F1B without running out of memory.
# </details>
#
# A picture of the two schedules on paper (each bar one action; white: idle):

# %%
fig, axes = plt.subplots(2, 1, figsize=(11, 4.2), sharex=True)
for ax, s in zip(axes, parallel.SCHEDULES, strict=True):
    for (stage, (kind, i)), (a, b) in parallel.timeline(s, 4, 8, 1.0, 2.0).items():
        ax.broken_barh([(a, b - a)], (stage - 0.4, 0.8),
                       facecolors="tab:blue" if kind == "F" else "tab:orange")  # fmt: skip
        ax.text((a + b) / 2, stage, f"{kind}{i}", ha="center", va="center", fontsize=7,
                color="white")  # fmt: skip
    ax.set_yticks(range(4), [f"stage {k}" for k in range(4)])
    ax.set_ylim(3.5, -0.5)
    ax.set_title(f"{s}: 4 stages, 8 micro-batches (forward 1, backward 2 time units)")
axes[-1].set_xlabel("time")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### torch's own: `torch.distributed.pipelining`
#
# torch ships these schedules as `ScheduleGPipe` and `Schedule1F1B` (with
# `PipelineStage` for a stage's module); they run here on the emulated network
# too (point-to-point underneath). torch divides the summed gradients by the
# number of micro-batches (`scale_grads=True`), as the course's `run_stage`
# does by dividing each micro-batch's loss.


# %%
def torch_pipeline(schedule, micro=4):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    rank, stages = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    x, y = torch.randn(micro * MICRO_ROWS, H), torch.randn(micro * MICRO_ROWS, H)
    layers = stage_layers()
    kind = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[schedule]
    stage = PipelineStage(layers[rank], rank, stages, torch.device("cpu"))
    sched = kind(stage, n_microbatches=micro, loss_fn=nn.functional.mse_loss)
    if rank == 0:
        sched.step(x)
    elif rank == stages - 1:
        sched.step(target=y)
    else:
        sched.step()
    ours = stage_layers()
    actions = parallel.SCHEDULES[schedule](rank, stages, micro)
    batches = x.chunk(micro), y.chunk(micro)
    parallel.run_stage(ours[rank], actions, (MICRO_ROWS, H), *batches, nn.functional.mse_loss)
    got, want = ours[rank][0].weight.grad, layers[rank][0].weight.grad
    return ((got - want).abs().max() / want.abs().max()).item()


for s in parallel.SCHEDULES:
    diff = max(cluster.run(torch_pipeline, s))
    print(f"run_stage against torch's Schedule{s}:\n  " + agreement(diff))

# %% [markdown]
# ## 5. Expert parallelism: all-to-all, and the hot expert
#
# A mixture-of-experts (MoE) layer replaces the MLP by E experts and a router
# that sends each token to one of them (top-1, as in the Switch Transformer,
# Fedus et al. 2022). With experts spread over the ranks (GShard, Lepikhin et
# al. 2021), each rank sends each of its tokens to the rank that holds its
# expert (**dispatch**) and gets the result back (**combine**): two
# all-to-alls forward, two backward. The router decides how many tokens go
# where, so the splits are **uneven**: the ranks first swap their counts (an
# all-to-all of one number each, with notebook 01's `all_to_all_single`), then
# the tokens with `input_split_sizes` and `output_split_sizes`. (Notebook 05
# costed an even all-to-all on A2 wiring; here it is uneven.)

# %%
print(inspect.getsource(parallel.moe.all_to_all))


# %%
def moe_against_one():
    torch.manual_seed(0)
    gate, experts = nn.Linear(H, 8), nn.ModuleList(nn.Linear(H, H) for _ in range(8))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    x = torch.randn(world * TOKENS, H)
    ref = parallel.moe_reference(x, gate, experts)
    out = parallel.MoE(gate, experts)(x.chunk(world)[rank])
    mine = ref.chunk(world)[rank]
    return ((out - mine).abs().max() / mine.abs().max()).item(), dist.get_rank()


moe_diff = max(d for d, _ in cluster.run(moe_against_one))  # 8 experts on 4 ranks: 2 each
print("MoE layer on 4 ranks against one process:\n  " + agreement(moe_diff))

# %% [markdown]
# **The cost of a hot expert.** The all-to-all ends when its busiest rank has
# received everything. Below, each rank holds 256 tokens of 64 values; the
# router sends them evenly, then sends 70 % of every rank's tokens to the
# expert on rank 0. The same number of tokens moves in total.
#
# **Predict, then run.** Is the skewed dispatch slower, though the same
# number of tokens moves? Which rank does everyone wait for?

# %%
TOK = 256


def splits(skew):
    """Tokens each rank sends to each rank: even, or 70 % to rank 0."""
    if not skew:
        return [[TOK // RANKS] * RANKS for _ in range(RANKS)]
    hot = int(0.7 * TOK)
    rest = (TOK - hot) // (RANKS - 1)
    return [[hot + (TOK - hot - rest * (RANKS - 1))] + [rest] * (RANKS - 1) for _ in range(RANKS)]


def dispatch_time(matrix):
    rank = dist.get_rank()
    send = matrix[rank]
    recv = [matrix[j][rank] for j in range(RANKS)]
    x, out = torch.randn(sum(send), H), torch.empty(sum(recv), H)
    return time_iterations(lambda i: dist.all_to_all_single(out, x, recv, send), 3).median


moe_rows = []
for skew in (False, True):
    m = splits(skew)
    received = [sum(m[j][r] for j in range(RANKS)) for r in range(RANKS)]
    moe_rows.append({"routing": "70 % to rank 0" if skew else "even",
                     "tokens received per rank": received,
                     "imbalance (max/mean)": parallel.imbalance(received),
                     "busiest rank receives": max(received) * H * 4,
                     "measured": cluster.run(dispatch_time, m)[0]})  # fmt: skip

# %% tags=["nbval-ignore-output"]
table(moe_rows, formats={"measured": format_time, "busiest rank receives": format_size,
                         "imbalance (max/mean)": ".2f"})  # fmt: skip

# %%
even, skewed = moe_rows
print(
    f"the same tokens in all ({sum(even['tokens received per rank'])}); "
    f"the busiest rank receives {skewed['imbalance (max/mean)']:.2f}x the mean"
)
print(
    f"the skewed dispatch is over 1.2x slower than the even one: "
    f"{skewed['measured'] > 1.2 * even['measured']}"
)

# %% [markdown]
# The hot rank receives 70 % of everyone's tokens over its one NIC; the others
# wait for it. Real MoE training caps each expert's intake (a **capacity
# factor**, dropping or re-routing the excess) and adds a load-balancing loss
# to the router (Fedus et al. 2022, §2.2): both are about this all-to-all.
#
# ## 6. Layouts at scale: DP × TP × PP × EP on 4096 NPUs
#
# A real job combines them all. A **layout** says how many ways each is split:
# DP × TP × PP (× EP, which shards the experts over DP ranks) = the NPUs.
# Ranks are numbered as Megatron does: TP fastest, then DP, then PP, so a TP
# group of 8 is one server, and a DP or PP group strides across servers.
#
# The workload: **GPT-3 175B** (Brown et al. 2020, Table 2.1: 96 layers,
# d_model 12288, context 2048, batch 3.2M tokens = 1536 sequences), micro-batch
# of one sequence, bf16 activations and gradients. Per step and per NPU, with
# m = 1536 / DP micro-batches per pipeline:
#
# | class | group | calls per step | bytes per call |
# |---|---|---|---|
# | TP all-reduce | TP | 4 · (layers / PP) · m | one activation: seq · h · 2 |
# | PP send/recv | PP | 2 · m | one activation |
# | DP all-reduce | DP | 1 | the stage's gradients: 2Ψ / (TP·PP) |
# | EP all-to-all (MoE only) | EP | 4 · (layers / PP) · m | one activation |
#
# Each call is timed with the course's topology simulator (notebook 05) on
# the group's part of the cluster: a direct (mesh) all-reduce inside a server
# (HCCL's Mesh on the A2's HCCS; over NVSwitch on the DGX), a ring across
# servers, the two-level all-reduce when a group spans both, with congestion
# (a rank's messages share its links). Both clusters give every NPU its own
# NIC, so the groups of one class run side by side on separate links.
#
# **No overlap is assumed**: each class's time adds to the step, as if nothing
# hid behind anything. The pipeline bubble, (PP − 1) micro-batch slots, is
# added too; it needs a compute rate, and a layout must fit in memory. Both are
# **assumptions, the same on both clusters** (no primary source was found for
# the Ascend 910B's figures), so what differs between them is the network:

# %%
A2 = parallel.Cluster("Atlas 800T A2", topology.ascend_a2)
DGX = parallel.Cluster("DGX H100", topology.dgx_h100)
W = parallel.GPT3_175B
print(
    f"{W.name}: Ψ = {W.params / 1e9:.0f} B parameters (from the shape; embeddings left out), "
    f"{W.global_batch} sequences of {W.seq} tokens per step"
)
print(
    f"assumed, per NPU: {A2.flops / 1e12:.0f} TFLOP/s achieved, {A2.memory / 1e9:.0f} GB for "
    "model states (16Ψ bytes, mixed-precision Adam, split over TP·PP)"
)
for c in (A2, DGX):
    print(c.network(2).describe())

# %% [markdown]
# **Predict, then run.** At 4096 NPUs, which layout wins on each cluster? Is
# tensor parallelism inside the server, and are data and pipeline parallelism
# across?

# %%
for c in (A2, DGX):
    ranked = parallel.best(W, 4096, c)
    display(
        table(
            [{"layout": str(lay), "communication + bubble": t} for t, lay in ranked[:6]],
            formats={"communication + bubble": format_time},
            title=f"{c.name}, 4096 NPUs: the best 6 of {len(ranked)} layouts that fit",
        )
    )
    best_time, best = ranked[0]
    display(table(parallel.step_time(W, best, c),
                  formats={"bytes": format_size, "time": format_time},
                  title=f"{c.name}: {best}, each class per step, per NPU"))  # fmt: skip

# %%
for c in (A2, DGX):
    _, best = parallel.best(W, 4096, c)[0]
    where = {r["class"]: r["where"] for r in parallel.step_time(W, best, c)}
    print(
        f"{c.name}: best {best}; TP {where['TP all-reduce']} the server (TP = "
        f"{best.tp} = {c.server} NPUs per server: {best.tp == c.server}); DP "
        f"{where['DP all-reduce']}, PP {where['PP send/recv']}"
    )

# %% [markdown]
# The computation finds Megatron's rule of thumb (Narayanan et al. 2021, §3):
# tensor parallelism up to the server's size, where its many all-reduces ride
# HCCS or NVLink; pipeline parallelism across servers, where it sends one
# activation per micro-batch; data parallelism across too, where its one
# gradient all-reduce per step is cheap once TP·PP has shrunk each stage's
# gradients. A tensor-parallel group of 16 spans two servers: look at its row.

# %%
across = parallel.Layout(dp=16, tp=16, pp=16)
for c in (A2, DGX):
    rows = {r["class"]: r for r in parallel.step_time(W, across, c)}
    _, best = parallel.best(W, 4096, c)[0]
    inside = {r["class"]: r for r in parallel.step_time(W, best, c)}
    per_call = rows["TP all-reduce"]["time"] / rows["TP all-reduce"]["calls"]
    per_call_in = inside["TP all-reduce"]["time"] / inside["TP all-reduce"]["calls"]
    print(
        f"{c.name}: one TP all-reduce over 16 NPUs (2 servers) {format_time(per_call)}, "
        f"over 8 (1 server) {format_time(per_call_in)}: {per_call / per_call_in:.1f}x"
    )

# %% [markdown]
# How the best layout changes with the cluster's size (the same model, the
# same batch; fewer NPUs need more model parallelism to fit):

# %%
sizes = []
for n in (64, 512, 4096):
    row = {"NPUs": n}
    for c in (A2, DGX):
        t, lay = parallel.best(W, n, c)[0]
        row[c.name] = f"{lay}  ({format_time(t)})"
    sizes.append(row)
table(sizes, title=f"{W.name}: the best layout and its communication + bubble per step")

# %% [markdown]
# At 512 NPUs the DGX's best tensor-parallel group is 4, not 8: the numbers,
# not the rule, decide, and they depend on the assumptions above (change
# `flops` or `memory` in `parallel.Cluster` and run again).
#
# **Exercise 12.2.** A smaller model on a smaller cluster: GPT-3 6.7B (Brown et
# al. 2020, Table 2.1: 32 layers, d_model 4096, batch 2M tokens = 1024
# sequences) on 128 NPUs of Atlas 800T A2 (16 servers). Choose a layout
# (`parallel.Layout(dp, tp, pp)`) and predict its communication time per step
# (every class, bubble excluded). The grader accepts a layout within 10 % of
# the best one's time and a prediction within 10 % of the simulator's.
# `parallel.collectives(workload, layout)` lists each class's calls and bytes;
# `parallel.placement` says where a group sits; the closed forms of notebook 04
# (`lab.costmodel`) give a call's time.

# %%
W67 = parallel.Workload("GPT-3 6.7B", layers=32, hidden=4096, seq=2048, global_batch=1024,
                        source="Brown et al. (2020), Table 2.1")  # fmt: skip


# %%
# Exercise 12.2: a layout for GPT-3 6.7B on 128 A2 NPUs, and its communication time
def choose_layout():
    # BEGIN SOLUTION
    return parallel.best(W67, 128, A2)[0][1]
    # END SOLUTION


def predict_communication(layout):
    # BEGIN SOLUTION
    from labsupport import costmodel

    hccs = A2.network(16).dims[0].bytes_per_s  # one HCCS link, bytes/s
    roce = A2.network(16).dims[1].bytes_per_s  # one NIC
    total = 0.0
    for _, kind, size, stride, calls, nbytes in parallel.collectives(W67, layout):
        inside, across = parallel.placement(size, stride, A2.server)
        if kind == "send":
            t = nbytes / (roce if across > 1 else hccs)
        elif across == 1:  # Mesh inside a server
            t = costmodel.direct_all_reduce_time(nbytes, size, 0, 1 / hccs, ports="all")
        else:
            t = costmodel.hierarchical_all_reduce_time(
                nbytes, size, 0, 1 / hccs, ranks_per_node=inside, inter_alpha=0,
                inter_beta=1 / roce)  # fmt: skip
        total += calls * t
    return total
    # END SOLUTION


# %%
check_layout(choose_layout, predict_communication, W67, 128, A2)

# %% [markdown]
# ### Handing a layout to ASTRA-sim
#
# The course's simulator times each class alone; ASTRA-sim (notebook 05)
# simulates a whole training step, compute and overlap included, from an
# **execution trace** per NPU in MLCommons' **Chakra** format. Two ways in,
# described here, not run (no Chakra package is on the registries this course
# installs from):
#
# 1. From a real run: record PyTorch's execution trace and a Kineto trace on
#    each rank, join them, and convert (the commands of mlcommons/chakra's
#    user guide):
#
#    ```
#    chakra_trace_link --chakra-host-trace pytorch_et_0.json \
#        --chakra-device-trace kineto_trace_0.json --rank 0 \
#        --output-file chakra_host_device_trace_0.json
#    chakra_converter PyTorch --input chakra_host_device_trace_0.json \
#        --output chakra_trace.0.et
#    ```
#
# 2. From a layout on paper: write ASTRA-sim's text workload (one line per
#    layer with its compute times and the collective and bytes of its forward,
#    input-gradient and weight-gradient passes, the TP group being the "model
#    parallel NPU group") from `parallel.collectives`, and convert it:
#
#    ```
#    chakra_converter Text --input workload.txt --output workload \
#        --num-npus 4096 --num-passes 1
#    ```
#
# Then run ASTRA-sim's analytical backend with the network the course writes
# (`labsupport.runtime.astra`, notebook 05, for the rail-wired A2 preset) and
# compare its step time with the sum of this notebook's classes: the gap is
# what overlap hides.
#
# > **Common mistakes**
# > - All-reducing in g's backward too (or in f's forward): the gradients come
# >   out t times too large, silently. The grader of 12.1 says so.
# > - Counting TP's traffic once per layer: it is four all-reduces per layer
# >   per micro-batch (two blocks, forward and backward).
# > - Expecting 1F1B to shrink the bubble: it shrinks activation memory; only
# >   more micro-batches (or interleaved stages) shrink the bubble.
# > - A blocking `send` in a pipeline stage: two stages that send to each other
# >   at once can wait for ever; `isend` and wait at the end.
# > - Putting a TP group across servers because the arithmetic divides: every
# >   one of its all-reduces then crosses the NIC.
#
# ## Recap
#
# - Tensor parallelism: f and g, one all-reduce of the activations forward and
#   one backward per block, four per layer per micro-batch; sequence
#   parallelism trades each for a reduce-scatter and an all-gather, the same
#   bytes, 1/t of the activations.
# - Pipeline parallelism: one send per micro-batch per boundary; a bubble of
#   (p − 1)/m for GPipe and 1F1B alike, measured; 1F1B holds p − s
#   micro-batches, GPipe m.
# - Expert parallelism: dispatch and combine all-to-alls with uneven splits;
#   the busiest rank sets the time.
# - At 4096 NPUs the computation puts TP inside the server and DP and PP
#   across, on both clusters, under stated assumptions and no overlap.
#
# **What ran where.** The course's tensor, sequence, pipeline and expert
# parallelism ran on the emulated network and equal one process; torch's
# `parallelize_module` (ColwiseParallel, RowwiseParallel) ran on plain gloo (a
# DeviceMesh needs a named process group, which the emulated backend does not
# register) and equals the course's; torch's `ScheduleGPipe` and
# `Schedule1F1B` ran on the emulated network and equal the course's stages.
#
# **Where to go next.** Notebook 11 shards the data-parallel side (ZeRO-2/3,
# FSDP); notebook 05's simulator and ASTRA-sim files take these layouts
# further. The code, each file under 160 lines:
#
# - `labsupport/parallel/tensor.py` (`ParallelMLP`): f and g, the column- then
#   row-parallel MLP, its sequence-parallel twin;
# - `labsupport/parallel/pipeline.py` (`one_f_one_b`): GPipe and 1F1B, a stage
#   over send/recv, the timeline and the bubble;
# - `labsupport/parallel/moe.py` (`MoE`): dispatch and combine with uneven splits;
# - `labsupport/parallel/layout.py` (`step_time`): each collective class of a
#   layout, timed with the topology simulator.

# %% tags=["nbval-ignore-output"]
cluster.shutdown()
