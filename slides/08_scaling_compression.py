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

# %% [markdown] slideshow={"slide_type": "slide"}
# # 08 · Scaling efficiency and gradient compression
#
# Add ranks: the compute is split, but every rank still all-reduces the **whole** gradient.
#
# - strong and weak scaling efficiency, and the arithmetic slips of published tables
# - the α-β model at large $p$; the batch per rank moves compute vs communication
# - fp16, PowerSGD, top-k with error feedback: bytes, time, convergence

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Two ways out when communication dominates: more work per rank
# (a larger batch per rank), or fewer bytes (compression). The notebook
# measures both on 1, 2 and 4 ranks of the emulated `slow-ethernet` network of
# notebook 04 (1 ms per message, 50 MB/s per link).

# %% slideshow={"slide_type": "skip"}
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

import labsupport as lab
from labsupport import compress, costmodel, netem, scaling
from labsupport.runtime.experiments import compression_runs, ddp_runs, scaling_runs, workload

# notebook 08's model: notebook 07's MLP, 1.2 MB of float32 gradients in 6 tensors
RANKS = 4
CFG = workload.Config(in_features=64, hidden=512, layers=3, out_features=16, batch=64, lr=0.05)
NBYTES = CFG.param_bytes()
NET = netem.resolve("slow-ethernet")
ALPHA, BETA = NET.inter.alpha, NET.inter.beta
cluster = lab.Cluster(RANKS, network=NET)
threads = cluster.run(ddp_runs.use_threads)  # cores // ranks threads per rank
one_rank_model = workload.make_model(CFG)


def forward_backward(rows):
    x, y = torch.randn(rows, CFG.in_features), torch.randn(rows, CFG.out_features)
    one_rank_model.zero_grad(set_to_none=True)
    workload.loss_fn(one_rank_model(x), y).backward()


# compute measured on the ranks (emulated clock: CPU time), as notebook 08 section 1 does
PER_SAMPLE, FIXED = cluster.run(scaling_runs.time_per_sample, forward_backward, [64, 256, 1024], 3)[0]
AR4 = costmodel.ring_all_reduce_time(NBYTES, RANKS, ALPHA, BETA)
B_GLOBAL = int(round(4 * AR4 / PER_SAMPLE / 64)) * 64 or 64  # compute on 1 rank = 4 x AR4
B_RANK = B_GLOBAL // RANKS
p_range = 2 ** np.arange(0, 11)


def efficiency(kind, algorithm):
    rows = B_GLOBAL / p_range if kind == "strong" else B_RANK + 0 * p_range
    t1 = FIXED + PER_SAMPLE * rows[0]
    tp = [scaling.model_step(FIXED + PER_SAMPLE * r, NBYTES, int(p), ALPHA, BETA, algorithm)
          for r, p in zip(rows, p_range, strict=True)]
    return t1 / (p_range * tp) if kind == "strong" else t1 / np.array(tp)


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Two efficiencies: say which one
#
# $T_p$ = time of a step on $p$ ranks; $X_p$ = throughput (samples/s).
#
# - **strong** scaling, the global batch $B$ fixed ($B/p$ per rank); perfect is $T_p = T_1/p$:
#   $\quad E = \dfrac{T_1}{p\,T_p}$
# - **weak** scaling, the batch per rank $b$ fixed; perfect is $T_p = T_1$:
#   $\quad E = \dfrac{T_1}{T_p}$
# - throughputs at a fixed $b$ (weak scaling: $X_p = p\,b/T_p$):
#   $\quad E = \dfrac{X_p}{p\,X_1}$
#
# Without overlap, $T_p = \text{compute}(B/p) + 2(p-1)\alpha + 2\frac{p-1}{p}n\beta$:
# the all-reduce does not shrink with $p$.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The throughput form is weak scaling in other words
# ($X_p = p\,b/T_p$). The key sentence: the compute term shrinks with $p$, the
# all-reduce term grows towards $2n\beta$. Learners mix up the two
# definitions and then compare a strong-scaling number with a weak-scaling
# claim. Ask every report: was the global batch fixed, or the batch per rank?

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Recompute every efficiency column
#
# A constructed example of a mistake seen in circulation: 120 ms per step on 1 card, then
# (cards: ms, printed efficiency):

# %% slideshow={"slide_type": "-"}
scaling.print_recomputed(scaling.ARTICLE_STRONG)  # the notebook runs the same function

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Let the room compute the 32-card line before showing the cell:
# 120 / (32 × 9) is 41.7 %, not 52.1 %. The 8- and 16-card figures are right.
# This is exercise 08.1's point: recompute the column from the times or
# throughputs, relative to the *first* row (which need not be one card:
# perfect scaling from $c_0$ cards is $X_0\,c/c_0$). A second constructed
# example, a batch-size table, prints 25 % communication and 68 % efficiency in one row:
# without overlap efficiency is at most 1 − share, 75 % (exercise 08.2).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The α-β model at large $p$
#
# `scaling.model_step` (compute + all-reduce) with ring $2(p-1)\alpha + 2\frac{p-1}{p}n\beta$, binomial tree $2\lg p\,(\alpha + n\beta)$, NCCL's double binary tree:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
fig, axes = plt.subplots(1, 2, figsize=(9, 2.1), sharey=True)
for ax, kind in zip(axes, ("strong", "weak"), strict=True):
    for algorithm, style in zip(scaling.ALLREDUCE, ("-", "--", ":"), strict=True):
        ax.plot(p_range, efficiency(kind, algorithm), style, label=algorithm)
    ax.set(xscale="log", xlabel="ranks p", title=f"{kind} scaling", ylim=(0, 1.05))
axes[0].legend(fontsize=8)
plt.show()
print(f"ring: latency term = bandwidth term at p = nβ/α = {NBYTES * BETA / ALPHA:.1f}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The same model as the notebook (`scaling.model_step`), without
# its measured points: the notebook also runs 1, 2 and 4 ranks with the
# compute emulated and the all-reduce real on the emulated network, and the
# points sit on the model by construction (the emulator implements the same
# α-β model). Strong scaling collapses first: at large $p$ each rank computes
# almost nothing. Weak scaling has no plateau here: the ring's latency term
# equals its bandwidth term at $p = n\beta/\alpha$ (printed), a few tens of
# ranks with these numbers. The binomial tree pays $n\beta$ on each of its
# $2\lg p$ steps, so it overtakes the ring only at a few hundred ranks; NCCL's
# double binary tree keeps the ring's bandwidth with logarithmic latency and
# wins earlier. On a real cluster the network is faster but so is the
# compute: the ratios $n\beta$/compute and $\alpha$/compute decide.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: the batch per rank moves compute vs communication
#
# Real compute on 2 ranks, then an all-reduce of all gradients over `slow-ethernet`:
# compute grows with $b$, the all-reduce does not. Break-even:
# $b^* = \dfrac{\text{ring}(n, p) - \text{fixed}}{\text{per row}}$

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
P2 = 2  # ranks 2 and 3 sit this one out
ring = costmodel.ring_all_reduce_time(NBYTES, P2, ALPHA, BETA)
for b in (16, 1024):
    out = cluster.run(scaling_runs.compute_and_comm, P2, b, CFG, 2)[0]
    share = out["all_reduce"] / (out["compute"] + out["all_reduce"])
    print(f"{b:>5} rows per rank: compute {out['compute'] * 1e3:6.1f} ms, all-reduce "
          f"{out['all_reduce'] * 1e3:5.1f} ms (model {ring * 1e3:.1f}): {share:.0%} communication")
b_star = scaling.break_even_batch(PER_SAMPLE, FIXED, NBYTES, P2, ALPHA, BETA)
print(f"b* from the one-thread line measured first ≈ {b_star:.0f} rows per rank")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask first: at 16 rows, what fraction of the step is
# communication? Then show. `compute_and_comm` puts a barrier between compute
# and the all-reduce, so the wait for the slower rank's compute stays out of
# the all-reduce's time (notebook 07: a span includes waiting for the slowest
# peer); the notebook draws both as timelines. Below $b^*$ adding ranks mostly
# adds communication, and without overlap efficiency cannot exceed 50 %. The
# notebook sweeps five batch sizes and compares this predicted $b^*$ with
# where the measured ratio crosses 1. Learners confuse this $b^*$ with the "critical batch size" of
# McCandlish et al. (2018): that one is about optimisation, this one about the
# machine. On a busy laptop the compute bars jump around: say so.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Sending fewer bytes
#
# Bytes all ranks send per step, for gradients of $N$ elements ($p$ ranks, ring):
#
# | method | collectives | bytes on the wire |
# |---|---|---|
# | none (float32) | 1 all-reduce | $2(p-1)\cdot N\cdot 4$ |
# | fp16 | 1 all-reduce | $2(p-1)\cdot N\cdot 2$ |
# | PowerSGD rank $r$ | 3 all-reduces (P, Q, vectors) | $(n+m)\,r$ per $n\times m$ matrix instead of $nm$ |
# | top-k | 2 all-gathers | $p(p-1)\cdot k\cdot(8+4)$ (int64 index, float32 value) |
#
# fp16 divides by $p$ **before** the sum (float16 overflows above 65504).
# PowerSGD is linear: every rank multiplies by the same $Q$, so $\sum_i M_i Q = (\sum_i M_i)\,Q$.

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** `compress.step_bytes` is this table as a formula; the notebook
# counts the bytes with `emulator.traffic()` and they match exactly. PowerSGD
# (Vogels et al. 2019): one step of power iteration per training step, warm
# start ($Q$ kept from the last step) and error feedback. torch's
# `powerSGD_hook` compresses a matrix only when $(n+m)\,r \cdot 2 < nm$. Top-k
# grows with $p$ (all-gathers, not all-reduce), so it pays off for small $k$
# only. `bf16_compress_hook` is refused by DDP by its name unless torch was
# built with CUDA or HIP and NCCL ≥ 2.10, or XPU (the build, not the group's
# backend); the notebook shows the same code under another name working.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Top-k: each rank picks different indices
#
# An all-reduce of the $k$ values adds rank 0's entry for one coordinate to rank 1's for another:

# %% slideshow={"slide_type": "-"}
for r, o in enumerate(cluster.run(compress.topk_wrong_and_right)):  # notebook 08's function
    wrong_ok, right_ok = o["wrong"].allclose(o["truth"]), o["right"].allclose(o["truth"])
    print(f"rank {r} picked {o['indices']}: all_reduce of values "
          f"{'matches' if wrong_ok else 'WRONG'}, all_gather of (index, value) "
          f"{'matches' if right_ok else 'WRONG'}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Predict before running: does the all-reduce version ever match?
# Only if the ranks happened to pick the same indices. Two fixes: all-gather
# the (index, value) pairs, or agree on one set of indices first. Then **error
# feedback** (Stich et al. 2018; DGC's local accumulation, Lin et al. 2018):
# `corrected = grad + residual`, send its top-k, keep the rest as the next
# residual, so every coordinate is sent eventually. That is exercise 08.3.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: bytes and step time per method
#
# torch's DDP with each method's communication hook, 4 ranks, `slow-ethernet`; bytes counted by `netem`:

# %% slideshow={"slide_type": "skip"}
METHODS = {"none": ("none", {}), "fp16": ("fp16", {}),
           "PowerSGD r=2": ("powersgd", {"rank": 2}),
           "top-k 1 %": ("topk", {"ratio": 0.01})}
WARMUP, TIMED = 3, 2  # DDP rebuilds buckets at step 1, PowerSGD compresses from step 2

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(f"{'method':>13} {'bytes/step':>10} {'formula':>10} {'step':>9} {'messages':>9} {'model':>9}")
for label, (method, options) in METHODS.items():
    result = cluster.run(compression_runs.train, method, WARMUP + TIMED, CFG, **options)[0]
    formula = compress.step_bytes(method, result["shapes"], RANKS,
                                  buckets=result["buckets"], **options)
    t, w, m = (np.median(result[k][WARMUP:]) * 1e3 for k in ("seconds", "messages", "model"))
    print(f"{label:>13} {result['bytes'][-1]:>10,} {formula:>10,} {t:6.1f} ms {w:6.1f} ms"
          f" {m:6.1f} ms")
cluster.shutdown()

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask first: PowerSGD sends the fewest bytes here; is it the
# fastest? Bytes are exact (counted equals formula). The step time sits on its
# model by construction (the model adds the CPU time the step measured to the
# messages' α-β time): the emulated clock charges each message the link
# model and each rank its CPU time, so a busy laptop shows the same table.
# The messages column is the network alone. Fewer bytes shorten the $n\beta$
# part, but every extra collective adds its α's: PowerSGD's three all-reduces
# per bucket cost $3 \cdot 2(p-1)\alpha$ = 18 ms here (one DDP bucket; torch's
# default buckets would make it two) however small the factors, top-k's two
# all-gathers $2 \cdot (p-1)\alpha$ = 6 ms; compression also costs compute
# (top-k over the whole gradient, PowerSGD's QR), which can change the order
# between the messages and the step columns.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Convergence: error feedback matters
#
# Loss curves stored by notebook 08 (`LONG_RUNS = True`: 300 steps per method, 3 seeds each):

# %% slideshow={"slide_type": "-"}
DATA = Path(lab.__file__).resolve().parents[1] / "notebooks/data/08_convergence.json"
stored = json.loads(DATA.read_text())  # label -> one loss curve per seed
fig, ax = plt.subplots(figsize=(8, 2.3))
for label, curves in stored["loss"].items():
    mean = np.convolve(np.mean(curves, axis=0), np.ones(10) / 10, mode="valid")
    ax.plot(mean, "--" if "no error" in label else "-", label=label,
            linewidth=2.5 if label == "none" else 1.2, color="black" if label == "none" else None)
ax.set(xlabel="step", ylabel="loss (mean over seeds)", yscale="log")
ax.legend(fontsize=7, ncol=3)
plt.show()

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Read from the file notebook 08 writes (training all seven
# methods from three seeds takes minutes; the notebook re-trains them with
# `LONG_RUNS = True`). The notebook's table gives, per method, the loss above
# the baseline of the same seed, with its spread over the seeds: a gap smaller
# than the spread is not a finding. fp16 lies on the baseline. Without error
# feedback, coordinates top-k never sends are never updated until they grow
# large. The problem is easy (all end near the same floor), so differences
# show on the way down; papers report no loss of accuracy with more care
# (DGC's momentum correction and warm-up; torch starts PowerSGD after
# `start_powerSGD_iter` steps, default 1000, about 10 % of training advised).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Common mistakes
#
# - an efficiency column not recomputed; strong and weak scaling mixed up
# - top-k values summed with `all_reduce` while ranks picked different indices
# - top-k without error feedback
# - judging compression by bytes alone: extra collectives pay α each, compression costs compute
#
# **Now:** notebook 08, 40 min (exercises 08.1–08.3). **Next:** 09 · troubleshooting.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** In a one-day workshop this notebook is homework or replaces 05
# (INSTRUCTOR.md). Exercise 08.1 takes 10 minutes, 08.2 (the article's
# batch-size table) 5, 08.3 (top-k with error
# feedback, all-gathered) 20–25; its grader also trains the model with the
# learner's function as a DDP hook and compares the loss with uncompressed
# training. `benchmarks/compression.py` prints the same table as the live
# demo from the command line.
