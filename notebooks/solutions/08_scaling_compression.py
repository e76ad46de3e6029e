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
# # 08 · Scaling efficiency and gradient compression
#
# Add ranks, and each step should take less time: the compute is split, but
# every rank still all-reduces the whole gradient. How much of the promised
# speed-up is left is the **scaling efficiency**, and it is easy to compute
# wrongly. When communication dominates, there are two ways out: give each rank
# more work per step (a larger batch per rank), or send fewer bytes
# (**gradient compression**). This notebook measures both, on 1, 2 and 4 ranks
# of an emulated slow network.
#
# **You will leave this notebook able to**
# - compute strong- and weak-scaling efficiency, and catch the arithmetic
#   mistakes of published tables;
# - predict with the α-β model where efficiency falls off at large scale;
# - see how the batch per rank moves the compute-to-communication ratio, and
#   find the batch below which communication dominates;
# - use fp16 compression, PowerSGD and top-k with error feedback, as DDP
#   communication hooks and as plain functions, and measure what each does to
#   bytes on the wire, to step time on a slow network, and to convergence.
#
# The exercises are **Exercise 08.1** (efficiencies from a table), **Exercise
# 08.2** (a batch-size table, in section 2) and **Exercise 08.3** (top-k with error
# feedback, section 5). Sources are in
# [REFERENCES.md](../../REFERENCES.md#compression).

# %%
import dataclasses
import inspect
import json
import linecache
import platform
import traceback
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import compress, costmodel, netem, scaling
from labsupport.runtime import emulator, trace
from labsupport.runtime.check.scaling import (
    check_batch_table,
    check_efficiencies,
    check_topk_error_feedback,
    reference_batch_table,
    reference_efficiencies,
)
from labsupport.runtime.experiments import compression_runs, ddp_runs, scaling_runs, workload

# %% [markdown]
# One model for the whole notebook: notebook 07's MLP, with 1.2 MB of float32
# gradients in 6 tensors. The sizes keep the notebook at about a minute and a
# half on a laptop. The loss curves of section 6 take a few hundred steps per
# method (a few minutes): `LONG_RUNS = True` runs them and stores the result in
# `notebooks/data/08_convergence.json`; with `LONG_RUNS = False` the notebook
# reads that file (written by this notebook, run with `LONG_RUNS = True`).

# %%
RANKS = 4
LONG_RUNS = False  # True: train every method for CONVERGENCE_STEPS steps (a few minutes)
CONVERGENCE_STEPS = 300
CFG = workload.Config(in_features=64, hidden=512, layers=3, out_features=16, batch=64, lr=0.05)
SHAPES = [tuple(p.shape) for p in workload.make_model(CFG).parameters()]
NBYTES = CFG.param_bytes()
print(f"model: gradients of shapes {SHAPES}, {NBYTES / 1e6:.2f} MB in all")

# %% [markdown]
# The ranks run on the `slow-ethernet` preset of `labsupport.netem` (notebook
# 04): every rank a machine of its own, 1 ms per message, 50 MB/s per link.

# %% tags=["nbval-ignore-output"]
NET = netem.resolve("slow-ethernet")
ALPHA, BETA = NET.inter.alpha, NET.inter.beta
cluster = lab.Cluster(RANKS, network=NET)
print("threads per rank:", cluster.run(ddp_runs.use_threads)[0])
print(f"network: {NET}")

# %% [markdown]
# ## 1. Scaling efficiency: two definitions
#
# Let `T_p` be the time of a training step on `p` ranks.
#
# - **Strong scaling** keeps the problem fixed (the global batch `B`, split
#   into `B/p` rows per rank). Perfect scaling is `T_p = T_1 / p`, so the
#   efficiency is **`E_strong = T_1 / (p · T_p)`**.
# - **Weak scaling** keeps the work *per rank* fixed (`b` rows each, the global
#   batch grows to `p·b`). Perfect scaling is `T_p = T_1`, so
#   **`E_weak = T_1 / T_p`**.
# - A table of **throughputs** `X_p` (samples per second) at a fixed batch per
#   rank is weak scaling in other words: `X_p = p·b / T_p`, so
#   **`E = X_p / (p · X_1)`**.
#
# Data parallelism without overlap costs, per step, the rank's compute and one
# all-reduce of all gradients (`n` bytes): `T_p = compute(B/p) + ring(n, p)`,
# with the ring's `2(p−1)α + 2(p−1)/p·n·β` (notebook 04) and nothing to send on
# one rank. The all-reduce does not shrink as `p` grows: it even grows towards
# `2nβ`. That is what eats efficiency.
#
# **Measuring it on a laptop.** Four ranks computing at once on a 2-core
# laptop would measure how the operating system shares two cores, not scaling.
# So in this section the compute is *emulated*: each rank's clock moves by as long
# as its rows took to compute on this machine, measured first on the ranks (one
# thread each) on the emulated clock, which charges a rank the CPU time it used,
# not the time it waited for a core; the all-reduce is real, over the emulated
# network. Emulated compute needs no CPU, so 4 ranks behave like 4 machines.

# %% tags=["nbval-ignore-output"]
torch.set_num_threads(1)
one_rank_model = workload.make_model(CFG)


def forward_backward(rows):
    x, y = torch.randn(rows, CFG.in_features), torch.randn(rows, CFG.out_features)
    one_rank_model.zero_grad(set_to_none=True)
    workload.loss_fn(one_rank_model(x), y).backward()


PER_SAMPLE, FIXED = cluster.run(scaling_runs.time_per_sample, forward_backward, [64, 256, 1024])[0]
print(f"forward + backward on one thread (rank 0): {FIXED * 1e3:.2f} ms "
      f"+ {PER_SAMPLE * 1e6:.1f} µs per row")

# %% [markdown]
# For strong scaling we choose a global batch whose compute on one rank is 4×
# the all-reduce on 4 ranks (a batch sized for *this* machine), and for weak
# scaling a quarter of it per rank. Each configuration runs on the first `p`
# ranks (`scaling_runs.emulated_steps`): barrier, sleep, all-reduce, the slowest
# rank's time, median of 5 steps after a warm-up.
#
# **Predict first.** The two `p = 4` rows are the same run (`B/4 = b` rows per
# rank), so they share `T_4`. Will their efficiencies be the same?
#
# <details><summary>Answer</summary>
#
# Almost. They differ only in `T_1`: strong scaling's is the whole batch `B = 4b` on
# one rank, `fixed + 4b·per_row`; weak scaling's is `b` rows, `fixed + b·per_row`,
# and its efficiency divides by `T_4` alone instead of `4·T_4`. So weak is higher by
# `3·fixed / (4·T_4)`: the fixed cost per step that strong scaling does not pay four
# times. With a fixed cost of well under a millisecond, a fraction of a percent.
# </details>

# %% tags=["nbval-ignore-output"]
AR4 = costmodel.ring_all_reduce_time(NBYTES, RANKS, ALPHA, BETA)
B_GLOBAL = int(round(4 * AR4 / PER_SAMPLE / 64)) * 64 or 64
B_RANK = B_GLOBAL // RANKS
PS = [1, 2, 4]


def compute_time(rows):
    return FIXED + PER_SAMPLE * rows


runs = {"strong": {}, "weak": {}}
for p in PS:
    for kind, rows in (("strong", B_GLOBAL // p), ("weak", B_RANK)):
        runs[kind][p] = cluster.run(scaling_runs.emulated_steps, p, compute_time(rows), NBYTES)[0]

print(f"strong: global batch {B_GLOBAL}; weak: {B_RANK} rows per rank\n")
print(f"{'':>6} {'p':>2} {'T_p measured':>13} {'T_p model':>10} {'E measured':>11} {'E model':>8}")
gaps = []
for kind in ("strong", "weak"):
    t1 = runs[kind][1]
    for p in PS:
        rows = B_GLOBAL // p if kind == "strong" else B_RANK
        model_t = scaling.model_step(compute_time(rows), NBYTES, p, ALPHA, BETA)
        model_1 = scaling.model_step(compute_time(B_GLOBAL if kind == "strong" else B_RANK),
                                     NBYTES, 1, ALPHA, BETA)
        if kind == "strong":
            e, e_model = (scaling.strong_efficiency(t1, runs[kind][p], p),
                          scaling.strong_efficiency(model_1, model_t, p))
        else:
            e, e_model = scaling.weak_efficiency(t1, runs[kind][p]), model_1 / model_t
        print(f"{kind:>6} {p:>2} {runs[kind][p] * 1e3:10.1f} ms {model_t * 1e3:7.1f} ms "
              f"{e:10.0%} {e_model:8.0%}")
        gaps.append(abs(runs[kind][p] / model_t - 1))
print(f"\nevery measured T_p within {max(gaps):.1%} of the model")

# %% [markdown]
# The efficiencies fall with `p` in both cases. That the measured times match the
# model is **by construction**, not a discovery: the compute is emulated (each
# rank's clock moves by exactly `compute_time(rows)`), and `netem` charges every
# message of the real ring all-reduce the same α-β link model that
# `scaling.model_step` adds up. What the match does check is that nothing else
# costs time: the ring sends the messages the formula counts, one after another,
# and the reductions' CPU time is small. Below 4 ranks the strong runs have more
# rows per rank than the weak ones, beyond 4 fewer: the plot further down shows how
# fast strong scaling then collapses.
#
# ### A published-style table
#
# Reports often give throughputs and an efficiency column. Here is a table in
# the style of one (the throughputs are samples per second; the last column is
# what the "report" claims):
#
# | cards | throughput | claimed efficiency |
# |---:|---:|---:|
# | 1 | 9 | 100 % |
# | 8 | 64 | 88.9 % |
# | 16 | 110 | 76.4 % |
# | 32 | 120 | 52.1 % |
#
# **Exercise 08.1.** Write `efficiencies(cards, throughput)`: each row's
# efficiency relative to the *first* row, as a fraction (0.5 for 50 %). The
# first row need not be one card: with `c₀` cards and throughput `X₀`, perfect
# scaling gives `X₀ · c / c₀` on `c` cards.

# %%
# Exercise 08.1: scaling efficiency from a table of throughputs
def efficiencies(cards, throughput):
    """Each row's efficiency relative to the first row (fractions)."""
    # BEGIN SOLUTION
    c0, x0 = cards[0], throughput[0]
    return [x / (c / c0 * x0) for c, x in zip(cards, throughput, strict=True)]
    # END SOLUTION


# %%
check_efficiencies(efficiencies)

# %% [markdown]
# Now check the claimed column against the arithmetic (the cell uses the
# library's reference function, so it runs whether or not your exercise is done):

# %%
cards, throughput, claimed = [1, 8, 16, 32], [9.0, 64.0, 110.0, 120.0], [1.0, 0.889, 0.764, 0.521]
efficiencies = reference_efficiencies(cards, throughput)
for c, x, e, claim in zip(cards, throughput, efficiencies, claimed, strict=True):
    wrong = f"WRONG: {x:g} / ({c} × {throughput[0]:g}) = {e:.1%}"
    verdict = "ok" if abs(e - claim) < 0.001 else wrong
    print(f"{c:>3} cards: claimed {claim:6.1%}, computed {e:6.1%}  {verdict}")

# %% [markdown]
# The same slip, in a constructed example of a mistake seen in circulation,
# with step times (strong scaling): 120 ms per step on one card and 9 ms on 32
# cards. Its 8- and 16-card figures are right, its 32-card one is not:

# %%
print(scaling.ARTICLE_STRONG)  # cards: (ms per step, printed efficiency)
print(inspect.getsource(scaling.print_recomputed))
scaling.print_recomputed(scaling.ARTICLE_STRONG)

# %% [markdown]
# Always recompute an efficiency column from the times or throughputs, and ask
# whether the batch per rank was fixed (weak) or the global batch (strong): the
# two answer different questions.
#
# ### Extrapolating to large p with the α-β model
#
# The model above (which the emulated runs follow by construction) prices any `p`.
# The ring's all-reduce costs `2(p−1)α + 2(p−1)/p·nβ`: its bandwidth term tends to
# `2nβ` and stays, its latency term grows without bound. A binomial-tree all-reduce
# (a binomial reduce, then a binomial broadcast, notebook 04) costs
# `2 lg p·(α + nβ)`: the whole gradient on every step, but only `lg p` steps.
# NCCL's **double binary tree** is a different algorithm: two trees, each carrying
# half of the data in pipelined blocks, every rank a leaf in one of them, so its
# bandwidth term tends to the ring's `2nβ` while its latency grows with `lg p`
# (`costmodel.double_binary_tree_all_reduce_time`, 4 blocks per tree). Same compute
# and network as above:

# %% tags=["nbval-ignore-output"]
p_range = 2 ** np.arange(0, 11)


def model_efficiency(kind, algorithm):
    rows_1 = B_GLOBAL if kind == "strong" else B_RANK
    t1 = compute_time(rows_1)
    out = []
    for p in p_range:
        rows = B_GLOBAL / p if kind == "strong" else B_RANK
        tp = scaling.model_step(compute_time(rows), NBYTES, int(p), ALPHA, BETA, algorithm)
        out.append(t1 / (p * tp) if kind == "strong" else t1 / tp)
    return np.array(out)


ALGORITHMS = {"ring": "-", "tree": "--", "double binary tree": ":"}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, kind in zip(axes, ("strong", "weak"), strict=True):
    for algorithm, style in ALGORITHMS.items():
        ax.plot(p_range, model_efficiency(kind, algorithm), style, label=f"model, {algorithm}")
    t1 = runs[kind][1]
    measured = [t1 / (p * runs[kind][p]) if kind == "strong" else t1 / runs[kind][p] for p in PS]
    ax.plot(PS, measured, "o", color="black", label="measured (emulated network)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ranks p")
    ax.set_title(f"{kind} scaling" + (f", global batch {B_GLOBAL}" if kind == "strong"
                                      else f", {B_RANK} rows per rank"))
    ax.axhline(0.5, color="0.7", linewidth=0.8)
    ax.legend(fontsize=8)
axes[0].set_ylabel("efficiency")
axes[0].set_ylim(0, 1.05)
plt.show()


def first_p(mask):
    return int(p_range[mask][0]) if mask.any() else None


n_beta = NBYTES * BETA
print(f"ring: latency term 2(p-1)α = bandwidth term 2(p-1)/p·nβ at p = nβ/α = "
      f"{n_beta * 1e3:.1f} ms / {ALPHA * 1e3:g} ms = {n_beta / ALPHA:.1f}")
weak_ring = model_efficiency("weak", "ring")
print("weak scaling, ring: " + ", ".join(f"{e:.0%} at {p}"
                                          for p, e in zip(p_range, weak_ring, strict=True)
                                          if 4 <= p <= 64))
for other in ("tree", "double binary tree"):
    p_wins = first_p(model_efficiency("weak", other) > weak_ring)
    print(f"the {other} beats the ring from p = {p_wins}" if p_wins
          else f"the {other} never beats the ring up to p = {p_range[-1]}")
for kind in ("strong", "weak"):
    below = first_p(model_efficiency(kind, "ring") < 0.5)
    print(f"{kind}: the ring's efficiency falls below 50 % at p = {below}" if below
          else f"{kind}: the ring stays above 50 % up to p = {p_range[-1]}")

# %% [markdown]
# Strong scaling collapses first: at large `p` each rank computes almost
# nothing and the step is all communication. Weak scaling has no plateau at
# `compute / (compute + 2nβ)` here: the ring's latency term `2(p−1)α` already
# equals its bandwidth term at `p = nβ/α` (printed above, a few tens of ranks with
# these numbers), so the efficiency keeps falling through that "limit". The
# binomial tree pays the whole `nβ` on each of its `2 lg p` steps, so it beats the
# ring only once the ring's latency has grown past that, at the `p` printed above;
# the double binary tree keeps the ring's bandwidth term with a logarithmic number
# of steps, and wins earlier (also printed). Real libraries switch algorithms for this
# reason (NCCL's double binary trees, HCCL's H-D_R, notebook 04).
#
# On a real cluster the network is much faster, but so is the compute of an
# accelerator: the efficiency depends on the **ratios** `nβ / compute` and
# `α / compute`, and where the latency takes over on `nβ/α`. Put your cluster's
# numbers into the same model before you conclude that the loss is small. The
# model knows nothing about contention or topology: notebook 05's simulator adds
# those.
#
# ## 2. Batch size moves the compute-to-communication ratio
#
# With the batch per rank `b`, compute grows with `b` while the all-reduce stays
# the same (the gradient's size does not depend on the batch). Below some `b`
# communication dominates the step; above it, compute does. Here the compute is
# **real**: two ranks (as many as this laptop's cores) each run forward and
# backward, then all-reduce all gradients over the slow network, recorded with
# `labsupport.runtime.trace`. A barrier between the two keeps the time one rank waits
# for the other's compute out of the all-reduce's span (notebook 07: a span
# includes waiting for the slowest peer). Ranks 2 and 3 sit this one out.
#
# **Predict first.** With 16 rows per rank, what fraction of the step is the
# all-reduce?
#
# <details><summary>Answer</summary>
#
# Most of it. On 2 ranks the ring all-reduce costs `2α + nβ`: 2 ms of latency
# plus 1.22 MB at 50 MB/s, about 26 ms, whatever the batch. Forward and
# backward of 16 rows of this MLP take far less on one thread (section 1's fit,
# printed there, gives a fixed cost plus a cost per row). The next two cells show it.
# </details>

# %% tags=["nbval-ignore-output"]
P2 = 2
BATCHES = [16, 64, 256, 1024, 2048]
split = {b: cluster.run(scaling_runs.compute_and_comm, P2, b, CFG) for b in BATCHES}
for b in (BATCHES[0], BATCHES[-1]):
    spans = trace.merge(out["spans"] for out in split[b][:P2])
    colors = {"compute": "tab:orange", "barrier": "0.7", "all_reduce": "tab:red"}
    lab.viz.plot_timeline(spans, colors=colors,
                          title=f"{b} rows per rank, {P2} ranks: compute, barrier, all-reduce")
    plt.show()

# %% tags=["nbval-ignore-output"]
compute_s = np.array([split[b][0]["compute"] for b in BATCHES])
comm_s = np.array([split[b][0]["all_reduce"] for b in BATCHES])
for b, c, m in zip(BATCHES, compute_s, comm_s, strict=True):
    print(f"{b:>5} rows per rank: compute {c * 1e3:7.1f} ms, all-reduce {m * 1e3:6.1f} ms, "
          f"communication {m / (c + m):4.0%} of the step")

# %% [markdown]
# **The break-even (critical) batch.** Model compute as a line in `b`,
# `fixed + per_row · b`, and the all-reduce as `ring(n, p)` from the α-β model,
# whatever `b`. They are equal at `b* = (ring(n, p) − fixed) / per_row`; below
# `b*` the step is mostly communication, and without overlap the efficiency
# cannot exceed 50 %. Two independent estimates, compared below:
#
# - **predicted**: from the line fitted in section 1 (`FIXED`, `PER_SAMPLE`:
#   forward and backward of the model alone, at other batch sizes), not from the
#   points above;
# - **measured**: where the measured ratio of all-reduce to compute above crosses
#   1 (interpolated between the two sizes around it, on a log scale).
#
# Whether compute really is a line shows in the slopes between the measured
# points, printed with the plot.
#
# (Some papers call a different thing the "critical batch size": the batch
# beyond which larger batches stop reducing the number of training steps,
# predicted by the gradient noise scale, McCandlish et al. 2018. That one is
# about optimisation; this one is about the machine.)

# %% tags=["nbval-ignore-output"]
b_model = scaling.break_even_batch(PER_SAMPLE, FIXED, NBYTES, P2, ALPHA, BETA)
ratio = comm_s / compute_s
crossing = np.nonzero((ratio[:-1] >= 1) & (ratio[1:] < 1))[0]
if len(crossing):
    i = crossing[0]
    frac = np.log(ratio[i]) / (np.log(ratio[i]) - np.log(ratio[i + 1]))
    b_measured = float(np.exp(np.log(BATCHES[i]) + frac * np.log(BATCHES[i + 1] / BATCHES[i])))
else:
    b_measured = None

fine = np.logspace(np.log10(BATCHES[0] / 2), np.log10(BATCHES[-1] * 2), 50)
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(BATCHES, compute_s * 1e3, "o", color="tab:orange", label="compute, measured")
ax.plot(fine, compute_time(fine) * 1e3, "-", color="tab:orange", label="compute, section 1's line")
ax.plot(BATCHES, comm_s * 1e3, "o", color="tab:red", label="all-reduce, measured")
ax.axhline(costmodel.ring_all_reduce_time(NBYTES, P2, ALPHA, BETA) * 1e3, color="tab:red",
           label="all-reduce, α-β model")
ax.axvline(b_model, color="0.4", linestyle="--", label=f"b* predicted ≈ {b_model:.0f}")
if b_measured:
    ax.axvline(b_measured, color="0.4", linestyle=":", label=f"b* measured ≈ {b_measured:.0f}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("rows per rank")
ax.set_ylabel("ms per step")
ax.legend(fontsize=8)
ax.set_title(f"{P2} ranks, slow-ethernet")
plt.show()
slopes = np.diff(compute_s) / np.diff(BATCHES)
print("compute per extra row between the measured sizes: "
      + ", ".join(f"{s * 1e6:.0f}" for s in slopes)
      + f" µs (section 1's line: {PER_SAMPLE * 1e6:.0f} µs"
      + (f"; largest/smallest {slopes.max() / slopes.min():.1f}x)" if slopes.min() > 0 else ")"))
print(f"break-even batch per rank: predicted {b_model:.0f} rows, "
      + (f"measured {b_measured:.0f} rows (ratio {b_measured / b_model:.2f})." if b_measured else
         "measured: no crossing in this sweep."))
straight = slopes.min() > 0 and slopes.max() / slopes.min() < 1.5
print("Compute " + ("is close to a line in the batch here (slopes within 1.5x)." if straight else
                    "is not one straight line in the batch here (caches, threads)."))
if b_measured:
    print("The two b* " + ("agree within 1.5x." if 2 / 3 < b_measured / b_model < 1.5 else
                           "differ by more than 1.5x: section 1's line (the model alone, other "
                           "sizes)\ndoes not predict these ranks' compute; the measured one is "
                           "what they did."))

# %% [markdown]
# ### A batch-size table that cannot hold
#
# A second constructed example of a mistake seen in circulation: a table of
# batch sizes per rank with the share of the step spent communicating and the
# scaling efficiency it reports
# (`scaling.ARTICLE_BATCH`: batch → (communication share, printed efficiency)).
# Its first row says 25 % communication and 68 % efficiency. Without overlap, with
# one rank's step being the compute alone, those two cannot both hold.
#
# **Exercise 08.2.** Write `batch_table(batches, first_share)`: for each batch per
# rank, the pair (communication share, efficiency) as fractions, given the
# communication share `first_share` at the first batch. Assume, as this section
# measured: the all-reduce takes the same time `C` whatever the batch; compute is
# proportional to the batch (`k·b`, no fixed part); no overlap; efficiency is weak
# scaling's `T_1 / T_p` with `T_1` the compute alone.

# %%
# Exercise 08.2: communication share and efficiency against the batch per rank
def batch_table(batches, first_share):
    """[(communication share, efficiency), ...] for each batch, from the first row's share."""
    # BEGIN SOLUTION
    c_over_k = batches[0] * first_share / (1 - first_share)  # C/k, from s0 = C / (C + k·b0)
    shares = [c_over_k / (c_over_k + b) for b in batches]
    return [(s, 1 - s) for s in shares]  # T_1 / T_p = k·b / (k·b + C) = 1 - share
    # END SOLUTION


# %%
check_batch_table(batch_table)

# %% [markdown]
# Now the example's table against the arithmetic (again with the library's
# reference, so this runs whether or not your exercise is done):

# %%
batches = list(scaling.ARTICLE_BATCH)
first_share = scaling.ARTICLE_BATCH[batches[0]][0]
print(f"{'batch':>5} {'share printed':>14} {'from row 1':>11} "
      f"{'efficiency printed':>19} {'1 - share':>10}")
for b, (share, _) in zip(batches, reference_batch_table(batches, first_share), strict=True):
    printed_share, printed_eff = scaling.ARTICLE_BATCH[b]
    print(f"{b:>5} {printed_share:>14.0%} {share:>11.0%} "
          f"{printed_eff:>19.0%} {1 - printed_share:>10.0%}"
          + ("" if abs(printed_eff - (1 - printed_share)) < 0.005 else "  <- inconsistent"))
shares_fit = all(abs(s - scaling.ARTICLE_BATCH[b][0]) < 0.01
                 for b, (s, _) in zip(batches, reference_batch_table(batches, first_share),
                                      strict=True))
print(f"\nThe printed shares {'follow' if shares_fit else 'do not follow'} from the first row "
      "with a constant all-reduce (within 1 point);\nthe printed efficiencies are "
      + ("not 1 - share: the table contradicts itself, or counts what it does not say."
         if any(abs(e - (1 - s)) >= 0.005 for s, e in scaling.ARTICLE_BATCH.values())
         else "1 - share."))

# %% [markdown]
# An efficiency below `1 − share` means something else grows with `p` besides
# communication (waiting for the slowest rank, data loading, a smaller batch per
# rank in strong scaling), or that the efficiency and the share were measured on
# different runs. A table that does not say which cannot be checked: ask for the
# step times.
#
# Below `b*` adding ranks mostly adds communication. Larger batches per rank
# help, until the optimiser stops gaining from them (the other critical batch);
# beyond that, the remaining lever is to **send fewer bytes**.
#
# ## 3. Counting bytes, and fp16
#
# `emulator.traffic()` counts the payload bytes a rank has sent on the emulated
# network. Summed over the ranks, a ring all-reduce of `n` elements sends
# exactly `2(p−1)·n` elements, whatever `n` (every one of the `p` chunks goes
# round `p−1` times in the reduce-scatter and `p−1` times in the all-gather);
# `compress.ring_allreduce_bytes` is that formula.
#
# The simplest compression sends each gradient in **2 bytes instead of 4**:
# cast to float16, divide by `p` *before* the sum (float16 overflows above
# 65504), all-reduce, cast back. This is torch's `fp16_compress_hook`:

# %%
print(inspect.getsource(compress.fp16_allreduce))


# %%
def fp16_on_ranks(numel):
    """Bytes sent (all ranks) by a float32 and a float16 all-reduce, and fp16's relative error."""
    p = dist.get_world_size()
    grad = torch.randn(numel, generator=torch.Generator().manual_seed(dist.get_rank())) * 1e-2
    exact = grad.clone()
    before = emulator.traffic()["bytes_sent"]
    dist.all_reduce(exact)
    exact /= p
    middle = emulator.traffic()["bytes_sent"]
    half = compress.fp16_allreduce(grad)
    sent = torch.tensor([middle - before, emulator.traffic()["bytes_sent"] - middle])
    dist.all_reduce(sent)
    error = ((half - exact).norm() / exact.norm()).item()
    return sent.tolist(), error


numel = NBYTES // 4
(sent32, sent16), error = cluster.run(fp16_on_ranks, numel)[0]
for name, sent, size in (("float32", sent32, 4), ("float16", sent16, 2)):
    formula = compress.ring_allreduce_bytes(numel, size, RANKS)
    print(f"{name}: {sent:>9,} bytes sent by all ranks; formula 2(p-1)·n·{size} = {formula:>9,} "
          f"({'equal' if sent == formula else 'DIFFERENT'})")
print(f"relative error of the fp16 average (norm of the difference / norm): {error:.1e}")

# %% [markdown]
# **bf16 on a CPU-only torch.** torch also has `bf16_compress_hook` (bfloat16
# keeps float32's exponent range, with 8 significant bits). Here DDP refuses it
# when it is registered: `register_comm_hook` checks the hook's *name*, and
# accepts it only from a torch **build** with CUDA or HIP and NCCL 2.10+, or
# with XPU (`_check_comm_hook` in `torch/nn/parallel/distributed.py`). The
# process group's backend does not enter into it: this CPU-only torch refuses
# it on any group, a CUDA build would accept it on gloo too. Yet bfloat16
# tensors all-reduce fine on gloo in torch 2.13 (we checked; here the emulated
# network carries them).
# The workaround is the same few lines under another name,
# `compress.bf16_allreduce_hook`:

# %%
def try_bf16_hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    results = []
    for hook in (default_hooks.bf16_compress_hook, compress.bf16_allreduce_hook):
        model = torch.nn.parallel.DistributedDataParallel(workload.make_model(CFG))
        try:
            model.register_comm_hook(None, hook)
            x, y = compression_runs.teacher_batch(0, dist.get_rank(), dist.get_world_size(), CFG)
            workload.loss_fn(model(x), y).backward()
            results.append(f"{hook.__name__}: registered, one step trained")
        except TypeError as err:
            results.append(f"{hook.__name__}: TypeError: {err}")
    return results


print("\n".join(cluster.run(try_bf16_hooks)[0]))

# %% [markdown]
# ## 4. PowerSGD: a low-rank approximation, aggregated with all-reduce
#
# PowerSGD (Vogels et al. 2019) views each gradient as a matrix `M` (`n × m`)
# and sends a rank-`r` approximation `P Qᵀ` found with **one step of power
# iteration**: `P = M Q`, all-reduce `P`, orthonormalise it, `Q = Mᵀ P`,
# all-reduce `Q`. Two all-reduces, of `n·r` and of `m·r` numbers (`(n + m)·r`
# in all), instead of one of `n·m`. It works with all-reduce because it is linear: every rank multiplies
# by the *same* `Q`, so `Σᵢ Mᵢ Q = (Σᵢ Mᵢ) Q`.
#
# - **Warm start**: `Q` is kept from the previous step (gradients change
#   slowly), so one power-iteration step per training step is enough.
# - **Error feedback**: each rank adds what the approximation missed last step
#   (`M − P Qᵀ`) to its next gradient, so nothing is lost for good.
#
# The whole method for one matrix, as a plain class
# (`compress.PowerSGD.__call__`):

# %%
print(inspect.getsource(compress.PowerSGD.__call__))


# %%
def powersgd_on_ranks(ranks=(1, 2, 4), steps=4):
    """Relative error of PowerSGD's P Qᵀ against the average gradient, step by step."""
    g = torch.Generator().manual_seed(dist.get_rank())
    n, m = 512, 64
    shared = torch.Generator().manual_seed(0)  # the same low-rank part on every rank ...
    common = torch.randn(n, 4, generator=shared) @ torch.randn(4, m, generator=shared)
    grad = common + 0.3 * torch.randn(n, m, generator=g)  # ... plus each rank's own noise
    average = grad.clone()
    dist.all_reduce(average)
    average /= dist.get_world_size()
    u, s, vh = torch.linalg.svd(average, full_matrices=False)
    errors = {}
    for r in ranks:
        best = (average - u[:, :r] @ torch.diag(s[:r]) @ vh[:r]).norm() / average.norm()
        psgd = compress.PowerSGD(rank=r, error_feedback=False)  # warm start alone
        steps_err = [((psgd(grad) - average).norm() / average.norm()).item() for _ in range(steps)]
        errors[r] = (steps_err, best.item())
    return errors


print("relative error of P Qᵀ against the average gradient "
      f"(a {512} × {64} matrix, {512 * 64} numbers)")
for r, (errs, best) in cluster.run(powersgd_on_ranks)[0].items():
    print(f"rank {r}: steps 1-{len(errs)}: " + ", ".join(f"{e:.3f}" for e in errs)
          + f"; best possible (the SVD's) {best:.3f}; sends {(512 + 64) * r:>4} numbers")

# %% [markdown]
# The same gradient, step after step, without error feedback: with a random
# `Q` the first step is poor, and with warm start each step is one more power
# iteration, so the error falls towards the best rank-`r` approximation (the
# truncated SVD). In training the gradient changes a little from step to step,
# and error feedback sends later what the approximation missed.
# torch's `powerSGD_hook` does this for every matrix of a DDP bucket at once
# (all the `P`s in one all-reduce, all the `Q`s in another) and all-reduces the
# vectors (biases) as they are, in a third. It compresses a matrix only when
# `(n + m)·r · min_compression_rate < n·m` (default rate 2), and only from step
# `start_powerSGD_iter` on. torch's default for that is 1000 steps, and its
# documentation advises starting at about 10 % of the total training steps (early
# training is sensitive to inexact gradients); with error feedback or warm start
# (both on by default) the minimum is 2.
# We use 2, so that this notebook's short runs compress from their third step: in
# a real run, start with torch's advice.
# `compress.step_bytes` is that rule as a formula. Its batched variant,
# `batched_powerSGD_hook`, fails on torch 2.13:

# %% tags=["nbval-ignore-output"]
def try_batched_powersgd():
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    model = torch.nn.parallel.DistributedDataParallel(workload.make_model(CFG))
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                               start_powerSGD_iter=2)
    model.register_comm_hook(state, psgd.batched_powerSGD_hook)
    try:
        for step in range(3):
            x, y = compression_runs.teacher_batch(step, dist.get_rank(), dist.get_world_size(), CFG)
            workload.loss_fn(model(x), y).backward()
    except Exception as err:  # any error: we want to see which
        if str(err):
            return f"step {step}: {type(err).__name__}: {str(err)[:80]}"
        frame = traceback.extract_tb(err.__traceback__)[-1]  # raised with no message: show where
        check = linecache.getline(frame.filename, frame.lineno - 1).strip()
        return (f"step {step}: {type(err).__name__}, with no message, from torch's "
                f"{Path(frame.filename).name}, line {frame.lineno}, in {frame.name}:\n"
                f"    {check}\n        {frame.line}")
    return "three steps trained"


print("batched_powerSGD_hook:", cluster.run(try_batched_powersgd)[0])

# %% [markdown]
# The check that fails wants a batch of matrices (a 3-D tensor), and the batched
# hook hands `_orthogonalize` a single 2-D one: a torch bug in torch 2.13, on any
# device (the check looks only at the tensor's shape). `powerSGD_hook`, used
# below, works.
#
# ## 5. Top-k with error feedback
#
# Top-k sends only the `k` largest gradient entries of each rank, as
# (index, value) pairs. The catch: **each rank picks different indices**. An
# all-reduce of the `k` values adds rank 0's entry for one coordinate to rank
# 1's entry for another. On 4 ranks with 12 entries each and `k = 3`, against
# the true average of what the ranks send (every rank's top-k as a dense
# tensor, all-reduced):

# %%
print(inspect.getsource(compress.topk_allreduce_wrong))
print(inspect.getsource(compress.topk_allgather))

# %% [markdown]
# The experiment (the deck of this notebook runs the same function):

# %%
print(inspect.getsource(compress.topk_wrong_and_right))

# %% [markdown]
# **Predict first.** On how many of the 4 ranks does the all-reduce version give
# the true average?
#
# <details><summary>Answer</summary>
#
# On none, unless the ranks happen to pick the same indices. Each rank puts the
# summed values at *its own* `k` indices, so the ranks even disagree with each
# other; the all-gather version gives every rank the same, right, tensor.
# </details>

# %%
out = cluster.run(compress.topk_wrong_and_right)
np.set_printoptions(precision=2, suppress=True, linewidth=120)
print("true average:", out[0]["truth"].numpy())
for r, o in enumerate(out):
    print(f"rank {r} picked {o['indices']}: all_reduce version "
          f"{'matches' if torch.allclose(o['wrong'], o['truth']) else 'WRONG'}, "
          f"all_gather version {'matches' if torch.allclose(o['right'], o['truth']) else 'WRONG'}")
print("rank 0's all_reduce result:", out[0]["wrong"].numpy())

# %% [markdown]
# The all-gather sends `k` indices and `k` values from every rank to every
# other: `p(p−1)·k·(8 + 4)` bytes in all (int64 indices, float32 values). That
# grows with `p`, unlike an all-reduce, so top-k pays off for small `k` only.
# (Another way out: all ranks agree on one set of indices first, then
# all-reduce those values.)
#
# **Error feedback** (Stich et al. 2018; "local gradient accumulation" in Lin
# et al. 2018's Deep Gradient Compression): the entries a rank did not send are
# kept in a residual and added to its next gradient, so every coordinate is sent
# eventually:
#
# ```
# corrected = grad + residual
# send the top-k of corrected
# residual = corrected with the sent entries set to zero
# ```
#
# **Exercise 08.3.** Write `topk_ef(grad, residual, k)`: it returns the average
# over the ranks of what every rank sends (a dense tensor, the same on every
# rank) and this rank's new residual. Use `compress.topk(flat, k)` (indices and
# values of the `k` largest magnitudes), `dist.all_gather` and
# `compress.sparse(indices, values, numel)` (or `index_add_`). Do not change
# `grad` or `residual` in place. The grader compares two consecutive steps with
# the reference on every rank, then trains the model with your function as a
# DDP hook (top-k of 10 %) and compares the loss with uncompressed training.

# %%
# Exercise 08.3: top-k with error feedback, all-gathered
def topk_ef(grad, residual, k):
    """(the average over the ranks of every rank's top-k of grad + residual, the new residual)."""
    # BEGIN SOLUTION
    corrected = grad + residual
    indices, values = compress.topk(corrected, k)
    p = dist.get_world_size()
    all_indices = [torch.empty_like(indices) for _ in range(p)]
    all_values = [torch.empty_like(values) for _ in range(p)]
    dist.all_gather(all_indices, indices)
    dist.all_gather(all_values, values)
    average = compress.sparse(torch.cat(all_indices), torch.cat(all_values), grad.numel()) / p
    return average, corrected.index_fill(0, indices, 0.0)
    # END SOLUTION


# %% tags=["nbval-ignore-output"]
check_topk_error_feedback(topk_ef, cluster)

# %% [markdown]
# ## 6. What each method does to bytes, time and convergence
#
# Every method as a DDP communication hook on the same model
# (`compress.register`): none (torch's `allreduce_hook`), fp16, PowerSGD of
# rank 1, 2 and 4 (torch's hook), top-k of 1 % with error feedback (ours). The
# runs put the whole gradient in one DDP bucket (`bucket_cap_mb=1024`), so a hook
# runs once per step. For each, on the slow network: the bytes all ranks sent in
# one step, counted by `netem`, next to the formula's (`compress.step_bytes`),
# and the median step time (the slowest rank's) after three warm-up steps (DDP
# rebuilds its buckets at step 1, PowerSGD compresses from step 2). Beside it,
# two models of the same step: **messages**, the α-β time of the collectives the
# step called, one after the other (`netem.calls_time`), and **model**, that plus
# the **CPU** time the step measured (forward, backward, the hook's compression,
# the reductions).
#
# **Predict first.** PowerSGD r=1 sends the fewest bytes. Will it be the fastest
# step on this network (1 ms per message, 50 MB/s)?
#
# <details><summary>Answer</summary>
#
# No. Count messages as well as bytes. An uncompressed step is one ring
# all-reduce of 1.22 MB on 4 ranks: `6α + 1.5·nβ`, about 43 ms. fp16 halves the
# `nβ` part. PowerSGD runs three all-reduces per bucket (the `P`s, the `Q`s, the
# vectors): `18α` of latency however small its factors, plus its bytes and its
# QR decompositions. Top-k of 1 % runs two all-gathers (`2·3α`) per bucket, of
# about 110 kB through each rank (the other three ranks' 1 % of indices and
# values). These counts are per DDP bucket, and these runs use one; torch's
# default buckets (25 MiB, and a first bucket of 1 MiB after the rebuild) would
# give two here, and PowerSGD `36α`. So expect top-k first and none last, with
# PowerSGD (about 18 ms of latency, its r = 1, 2, 4 runs a few kilobytes apart)
# and fp16 (`6α + 0.75·nβ`, about 24 ms) in between, close to each other; the
# messages column says in which order the network alone puts them, the model
# column what the CPU's work changes.
# </details>

# %% tags=["nbval-ignore-output"]
METHODS = {
    "none": ("none", {}),
    "fp16": ("fp16", {}),
    "PowerSGD r=1": ("powersgd", {"rank": 1}),
    "PowerSGD r=2": ("powersgd", {"rank": 2}),
    "PowerSGD r=4": ("powersgd", {"rank": 4}),
    "top-k 1 %": ("topk", {"ratio": 0.01}),
}
WARMUP, TIMED = 3, 5
table = {}
for label, (method, options) in METHODS.items():
    result = cluster.run(compression_runs.train, method, WARMUP + TIMED, CFG, **options)[0]
    counted = result["bytes"][WARMUP:]
    formula = compress.step_bytes(method, result["shapes"], RANKS, buckets=result["buckets"],
                                  **options)
    table[label] = {"counted": counted, "formula": formula,
                    "seconds": float(np.median(result["seconds"][WARMUP:])),
                    "messages": float(np.median(result["messages"][WARMUP:])),
                    "model": float(np.median(result["model"][WARMUP:]))}
base = table["none"]
print(f"{'method':>13} {'bytes/step counted':>19} {'formula':>10} {'ratio':>6} "
      f"{'step measured':>14} {'messages':>9} {'CPU':>8} {'model':>9} {'meas/model':>10}")
for label, row in table.items():
    exact = all(c == row["formula"] for c in row["counted"])
    print(f"{label:>13} {row['counted'][0]:>19,} {row['formula']:>10,} "
          f"{base['formula'] / row['formula']:5.1f}x {row['seconds'] * 1e3:11.1f} ms "
          f"{row['messages'] * 1e3:6.1f} ms {(row['model'] - row['messages']) * 1e3:5.1f} ms "
          f"{row['model'] * 1e3:6.1f} ms "
          f"{row['seconds'] / row['model']:10.2f}"
          + ("" if exact else "  counted differs from formula!"))

# %% tags=["nbval-ignore-output"]
by_measured = sorted(table, key=lambda k: table[k]["seconds"])
by_messages = sorted(table, key=lambda k: table[k]["messages"])
worst = max(abs(r["seconds"] / r["model"] - 1) for r in table.values())
TIE = 1.5e-3  # steps closer than this are not ordered by a run of TIMED steps
close = [f"{a} and {b}" for a, b in zip(by_measured, by_measured[1:], strict=False)
         if table[b]["seconds"] - table[a]["seconds"] < TIE]  # fmt: skip
print(f"Every counted byte equals the formula: "
      f"{all(c == r['formula'] for r in table.values() for c in r['counted'])}.")
print("Fastest first, messages alone: " + " < ".join(by_messages))
print("Fastest first, measured:       " + " < ".join(by_measured))
moved = [k for k in table if by_messages.index(k) != by_measured.index(k)]
print("The CPU's work moves " + (", ".join(moved) if moved else "nothing") + " in the order.")
print(f"Every step within {worst:.0%} of its model (messages + CPU time, by construction).")
print(f"Within {TIE * 1e3:g} ms of each other, not ordered by this run:" + ("" if close else " none."))
for pair in close:
    print(f"  {pair}")
print(f"PowerSGD's latency alone: 3 all-reduces × 2(p-1) messages × {ALPHA * 1e3:g} ms = "
      f"{3 * 2 * (RANKS - 1) * ALPHA * 1e3:.0f} ms, however small its factors.")

# %% [markdown]
# Bytes are exact, and so, here, is time: the emulated clock charges each message
# what the link model says and each rank the CPU time it used, so measured and
# model agree by construction, up to the CPU time the model does not see (the
# ratio column). The messages column is the network's part alone: it orders the
# methods by their bytes and their `α`s. The CPU's work adds to every step, to
# PowerSGD's most (its QR decompositions and matrix products; the table's CPU
# column, model minus messages, gives each method's), and can change that
# order: the cell above says whether it did in this run. Steps closer than the printed gap are not ordered
# by a run this short; measure longer (`TIMED`) before ranking them. The lesson is in the model's terms: fewer
# bytes shorten the `nβ` part of the step, but each extra collective adds its
# `α`s, and the compression itself costs compute (a top-k over the whole
# gradient, QR decompositions). On a
# fast network, where `α` and compute dominate, the same methods can make a step
# *slower*: run `benchmarks/compression.py --network` with another preset to see.
#
# **Convergence.** The loss over `CONVERGENCE_STEPS` steps for each method,
# plus top-k *without* error feedback, against the uncompressed baseline (SGD
# with momentum; the data is a "teacher" network's outputs,
# `compression_runs.teacher_batch`, so the loss can fall). One run says little about a
# difference of a few percent, so every method trains from `len(SEEDS)` seeds
# (the model's initialisation and the data's order), and each method is compared
# with the baseline *of the same seed*. The network does not change the losses,
# only the time: these runs use a fast emulated network.

# %% tags=["nbval-ignore-output"]
SEEDS = (0, 1, 2)
DATA = Path(lab.__file__).resolve().parents[1] / "notebooks" / "data" / "08_convergence.json"
CURVES = {**METHODS, "top-k 1 %, no error feedback": ("topk", {"ratio": 0.01,
                                                              "error_feedback": False})}
if LONG_RUNS:
    FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
    cluster.run(emulator.set_network, FAST)
    losses = {label: [cluster.call(compression_runs.train, (method, CONVERGENCE_STEPS,
                                                   dataclasses.replace(CFG, seed=seed)),
                                   opts, timeout=900)[0]["loss"]
                      for seed in SEEDS]
              for label, (method, opts) in CURVES.items()}  # label -> one curve per seed
    cluster.run(emulator.set_network, NET)
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(json.dumps({"steps": CONVERGENCE_STEPS, "ranks": RANKS, "seeds": SEEDS,
                                "config": repr(CFG), "torch": torch.__version__,
                                "machine": platform.machine(), "loss": losses}, indent=1))
    print(f"trained {len(CURVES)} methods x {len(SEEDS)} seeds for {CONVERGENCE_STEPS} steps; "
          f"saved to {DATA.name}")
else:
    stored = json.loads(DATA.read_text())
    losses = stored["loss"]
    print(f"LONG_RUNS = False: loss curves read from notebooks/data/{DATA.name},\n"
          f"written by this notebook with LONG_RUNS = True ({stored['steps']} steps, "
          f"{stored['ranks']} ranks, seeds {stored['seeds']}, torch {stored['torch']}).\n"
          "Set LONG_RUNS = True to train them again (a few minutes).")

# %%
def smooth(values, window=10):
    return np.convolve(values, np.ones(window) / window, mode="valid")


fig, ax = plt.subplots(figsize=(8, 4.5))
for label, curves in losses.items():
    style = "--" if "no error" in label else "-"
    mean = smooth(np.mean(curves, axis=0))  # the mean over the seeds
    ax.plot(mean, style, label=label, linewidth=2.5 if label == "none" else 1.2,
            color="black" if label == "none" else None)
ax.set_xlabel("step")
ax.set_ylabel("training loss (mean over seeds, moving average of 10 steps)")
ax.set_yscale("log")
ax.set_title(f"{RANKS} ranks, {len(losses['none'])} seeds: compression against no compression")
ax.legend(fontsize=8)
plt.show()

EARLY = 60  # a point on the way down


def excess(label, window):
    """Per seed: this method's mean loss in ``window`` over the baseline's, minus 1."""
    return np.array([np.mean(mine[window]) / np.mean(base[window]) - 1
                     for mine, base in zip(losses[label], losses["none"], strict=True)])


early = {label: excess(label, slice(EARLY - 10, EARLY + 10)) for label in losses}
final = {label: excess(label, slice(-20, None)) for label in losses}
print("loss above the baseline of the same seed: "
      f"mean [lowest, highest] over {len(losses['none'])} seeds")
print(f"{'':>28}  {'near step ' + str(EARLY):>22}  {'last 20 steps':>22}")
for label in losses:
    cells = [f"{v.mean():+6.0%} [{v.min():+5.0%}, {v.max():+5.0%}]"
             for v in (early[label], final[label])]
    print(f"{label:>28}  {cells[0]:>22}  {cells[1]:>22}")


def compare(a, b, values):
    """Which of a, b is lower on every seed, or that the seeds disagree."""
    diff = values[a] - values[b]
    if (diff < 0).all():
        return f"{a} is below {b} on every seed"
    if (diff > 0).all():
        return f"{a} is above {b} on every seed"
    return f"{a} and {b} change places between seeds"


for when, values in ((f"near step {EARLY}", early), ("over the last 20 steps", final)):
    print(f"\n{when}:")
    print("  " + compare("top-k 1 %, no error feedback", "top-k 1 %", values))
    print("  " + compare("top-k 1 %", "PowerSGD r=1", values))

# %% [markdown]
# Read the plot with the table above, and the table before the plot: a gap
# smaller than the spread between seeds is not a finding. fp16's rounding is far
# below the noise of a mini-batch gradient, so its curve lies on the baseline's.
# The lines under the table say, computed from the runs, whether top-k without
# error feedback stays above top-k with it on every seed, and how top-k of 1 %
# compares with PowerSGD r=1. Without error feedback, the coordinates top-k never
# sends are never updated until they grow large enough to be picked; error
# feedback sends them later. This problem is easy (every method ends near the
# same floor, which is the model's, not the method's), so differences show on the
# way down more than at the end; on harder problems they stay (Stich et al. 2018).
# Papers report no loss of accuracy with more care than here: DGC adds momentum
# correction and a warm-up to top-k (Lin et al. 2018); PowerSGD reaches SGD's
# accuracy on its benchmarks (Vogels et al. 2019), and torch starts it only after
# `start_powerSGD_iter` steps of plain all-reduce.
#
# > **Common mistakes**
# > - An efficiency column not recomputed from the throughputs (and strong and
# >   weak scaling mixed up). Recompute it: `X_p / (p·X_1)`.
# > - Top-k values summed with `all_reduce` while ranks picked different
# >   indices: the sum adds unrelated coordinates. All-gather (index, value)
# >   pairs, or agree on the indices first.
# > - Top-k without error feedback: what it never sends is never updated until it
# >   grows large enough to be picked.
# > - One seed per method: a difference of a few percent in loss can be the seed.
# > - Judging compression by bytes alone: extra collectives pay `α` each, and
# >   compression costs compute.
# > - Expecting `bf16_compress_hook` on gloo: DDP refuses it by name; use the
# >   same code under another name.
#
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/scaling.py`: strong and weak scaling efficiency, and the step-time model.
# - `labsupport/compress/fp16.py`: fp16 and bf16 compression.
# - `labsupport/compress/powersgd.py`: PowerSGD for one matrix, written out.
# - `labsupport/compress/topk.py`: top-k, the wrong all-reduce, error feedback.
# - `labsupport/compress/hooks.py`: the methods as DDP communication hooks (`register`).
# - `labsupport/compress/wire.py`: the bytes each method sends (`step_bytes`).
#
# ## Recap
#
# - Strong scaling `T_1 / (p·T_p)`, weak scaling `T_1 / T_p`, from throughputs
#   `X_p / (p·X_1)`. The all-reduce does not shrink with `p`, so strong
#   scaling falls first; the ring's `2(p−1)α` overtakes its bandwidth term at
#   `p = nβ/α` and sinks weak scaling too.
# - Compute grows with the batch per rank, the all-reduce does not: below the
#   break-even batch `b*`, communication dominates the step. Without overlap,
#   efficiency is at most `1 − communication share`.
# - fp16 halves the bytes exactly, PowerSGD sends `(n+m)·r` per matrix with
#   two all-reduces (plus one for the vectors), top-k sends `k` pairs per rank
#   with all-gathers; counted bytes equal the formulas exactly.
# - Step time is bytes *and* messages: on a latency-bound network the method with
#   the fewest bytes is not the fastest; the α-β model of the counted messages
#   orders them by the network alone, and the compression's own compute moves
#   that order (the model column adds the measured CPU time, so it agrees with
#   the measurement by construction).
# - Compare convergence over several seeds, each against the baseline of the same
#   seed; error feedback sends later what top-k leaves out.
#
# ## Where to go next
#
# - `benchmarks/compression.py` prints bytes per step and step time of none,
#   fp16, PowerSGD rank 2 and top-k 1 % on 4 ranks of the slow network, and
#   checks the counted bytes against the formulas.
# - Notebook 09 is about what goes wrong: timeouts, hangs, mismatched
#   collectives.

# %%
cluster.shutdown()
