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
from labsupport import compress, costmodel, ddp, netem, scaling, trace

# notebook 08's model: notebook 07's MLP, 1.2 MB of float32 gradients in 6 tensors
RANKS = 4
CFG = ddp.Config(in_features=64, hidden=512, layers=3, out_features=16, batch=64, lr=0.05)
NBYTES = CFG.param_bytes()
NET = netem.resolve("slow-ethernet")
ALPHA, BETA = NET.inter.alpha, NET.inter.beta

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
# A popular article on HCCL: 120 ms per step on 1 card, then (cards: ms, printed efficiency):

# %% slideshow={"slide_type": "-"}
article = {8: (18, 0.833), 16: (11, 0.682), 32: (9, 0.521)}  # cards: (ms/step, printed)
for p, (t, printed) in article.items():
    e = scaling.strong_efficiency(120, t, p)
    print(f"{p:>2} cards: 120 / ({p} × {t}) = {e:.1%}; printed {printed:.1%}"
          + ("" if abs(e - printed) < 0.001 else "  <- wrong"))

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Let the room compute the 32-card line before showing the cell:
# 120 / (32 × 9) is 41.7 %, not 52.1 %. The 8- and 16-card figures are right.
# This is exercise 08.1's point: recompute the column from the times or
# throughputs, relative to the *first* row (which need not be one card:
# perfect scaling from $c_0$ cards is $X_0\,c/c_0$).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The α-β model at large $p$
#
# Compute measured on this machine (one thread), the network `slow-ethernet`; ring $2(p-1)\alpha + 2\frac{p-1}{p}n\beta$ vs tree $2\lg p\,(\alpha + n\beta)$:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
torch.set_num_threads(1)
one_rank_model = ddp.make_model(CFG)


def forward_backward(rows):
    x, y = torch.randn(rows, CFG.in_features), torch.randn(rows, CFG.out_features)
    one_rank_model.zero_grad(set_to_none=True)
    ddp.loss_fn(one_rank_model(x), y).backward()


PER_SAMPLE, FIXED = scaling.time_per_sample(forward_backward, [64, 256, 1024], repeats=3)
AR4 = costmodel.ring_all_reduce_time(NBYTES, RANKS, ALPHA, BETA)
# a global batch whose compute on one rank is 4 × the all-reduce on 4 ranks
B_GLOBAL = int(round(4 * AR4 / PER_SAMPLE / 64)) * 64 or 64
B_RANK = B_GLOBAL // RANKS
p_range = 2 ** np.arange(0, 11)


def model_efficiency(kind, algorithm):
    t1 = FIXED + PER_SAMPLE * (B_GLOBAL if kind == "strong" else B_RANK)
    out = []
    for p in p_range:
        rows = B_GLOBAL / p if kind == "strong" else B_RANK
        compute = FIXED + PER_SAMPLE * rows
        tp = scaling.model_step(compute, NBYTES, int(p), ALPHA, BETA, algorithm)
        out.append(t1 / (p * tp) if kind == "strong" else t1 / tp)
    return np.array(out)


fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
for ax, kind in zip(axes, ("strong", "weak")):
    for algorithm, style in (("ring", "-"), ("tree", "--")):
        ax.plot(p_range, model_efficiency(kind, algorithm), style, label=algorithm)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ranks p")
    ax.set_title(f"{kind} scaling" + (f", global batch {B_GLOBAL}" if kind == "strong"
                                      else f", {B_RANK} rows per rank"))
    ax.axhline(0.5, color="0.7", linewidth=0.8)
    ax.legend()
axes[0].set_ylabel("efficiency")
axes[0].set_ylim(0, 1.05)
plt.show()

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The same model and code as the notebook (`scaling.model_step`),
# without its measured points: the notebook also runs 1, 2 and 4 ranks, with
# the compute emulated by sleeping (4 computing ranks on 2 cores would measure
# the scheduler) and the all-reduce real, and the points sit on the model.
# Strong scaling collapses first: at large $p$ each rank computes almost
# nothing. Weak scaling tends to compute / (compute + $2n\beta$) until the
# ring's $2(p-1)\alpha$ takes over; there the tree wins (NCCL's trees, HCCL's
# H-D_R). On a real cluster $n\beta$ is hundreds of times smaller.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: the batch per rank moves compute vs communication
#
# Real compute on 2 ranks, then an all-reduce of all gradients over `slow-ethernet`:
# compute grows with $b$, the all-reduce does not. Break-even:
# $b^* = \dfrac{\text{ring}(n, p) - \text{fixed}}{\text{per row}}$

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
cluster = lab.Cluster(RANKS, network=NET)
threads = cluster.run(ddp.use_threads)  # cores // ranks threads per rank
P2, BATCHES = 2, [16, 1024]  # ranks 2 and 3 sit this one out
COLOURS = {"compute": "tab:orange", "barrier": "0.7", "all_reduce": "tab:red"}
split = {b: cluster.run(scaling.compute_and_comm, P2, b, CFG, 2) for b in BATCHES}
for b in BATCHES:
    spans = trace.merge(out["spans"] for out in split[b][:P2])
    lab.viz.plot_timeline(spans, colors=COLOURS,
                          title=f"{b} rows per rank, {P2} ranks")
    plt.show()
compute_s = np.array([split[b][0]["compute"] for b in BATCHES])
comm_s = np.array([split[b][0]["all_reduce"] for b in BATCHES])
for b, c, m in zip(BATCHES, compute_s, comm_s):
    print(f"{b:>5} rows per rank: compute {c * 1e3:6.1f} ms, all-reduce {m * 1e3:5.1f} ms"
          f" (model {costmodel.ring_all_reduce_time(NBYTES, P2, ALPHA, BETA) * 1e3:.1f} ms)")
per_row, fixed = np.polyfit(BATCHES, compute_s, 1)
b_star = scaling.break_even_batch(per_row, max(fixed, 0.0), NBYTES, P2, ALPHA, BETA)
print(f"b* ≈ {b_star:.0f} rows per rank")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask first: at 16 rows, what fraction of the step is
# communication? Then show. The grey barrier keeps the wait for the slower
# rank's compute out of the all-reduce's span (notebook 07: a span includes
# waiting for the slowest peer). Below $b^*$ adding ranks mostly adds
# communication, and without overlap efficiency cannot exceed 50 %. The
# notebook sweeps five batch sizes and fits the line; two points are enough
# for a slide. Learners confuse this $b^*$ with the "critical batch size" of
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
# counts the bytes with `netem.traffic()` and they match exactly. PowerSGD
# (Vogels et al. 2019): one step of power iteration per training step, warm
# start ($Q$ kept from the last step) and error feedback. torch's
# `powerSGD_hook` compresses a matrix only when $(n+m)\,r \cdot 2 < nm$. Top-k
# grows with $p$ (all-gathers, not all-reduce), so it pays off for small $k$
# only. `bf16_compress_hook` is refused by DDP on gloo by its name; the
# notebook shows the same code under another name working.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Top-k: each rank picks different indices
#
# An all-reduce of the $k$ values adds rank 0's entry for one coordinate to rank 1's for another:

# %% slideshow={"slide_type": "-"}
def topk_wrong_and_right(numel=12, k=3):
    import torch.distributed as dist

    g = torch.Generator().manual_seed(10 + dist.get_rank())
    grad = torch.randn(numel, generator=g)
    indices, values = compress.topk(grad, k)
    truth = compress.sparse(indices, values, numel)  # what this rank sends, dense
    dist.all_reduce(truth)
    truth /= dist.get_world_size()
    wrong = compress.topk_allreduce_wrong(grad, k)
    right = compress.topk_allgather(grad, k)
    return sorted(indices.tolist()), wrong.allclose(truth), right.allclose(truth)


for r, (picked, wrong_ok, right_ok) in enumerate(cluster.run(topk_wrong_and_right)):
    print(f"rank {r} picked {picked}: all_reduce of values "
          f"{'matches' if wrong_ok else 'WRONG'}, all_gather of (index, value) "
          f"{'matches' if right_ok else 'WRONG'}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Predict before running: does the all-reduce version ever match?
# Only if the ranks happened to pick the same indices. Two fixes: all-gather
# the (index, value) pairs, or agree on one set of indices first. Then **error
# feedback** (Stich et al. 2018; DGC's local accumulation, Lin et al. 2018):
# `corrected = grad + residual`, send its top-k, keep the rest as the next
# residual, so every coordinate is sent eventually. That is exercise 08.2.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: bytes and step time per method
#
# torch's DDP with each method's communication hook, 4 ranks, `slow-ethernet`; bytes counted by `netem`:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
METHODS = {"none": ("none", {}), "fp16": ("fp16", {}),
           "PowerSGD r=2": ("powersgd", {"rank": 2}),
           "top-k 1 %": ("topk", {"ratio": 0.01})}
WARMUP, TIMED = 3, 2  # DDP rebuilds buckets at step 1, PowerSGD compresses from step 2
table = {}
for label, (method, options) in METHODS.items():
    result = cluster.run(compress.train, method, WARMUP + TIMED, CFG, **options)[0]
    formula = compress.step_bytes(method, result["shapes"], RANKS,
                                  buckets=result["buckets"], **options)
    seconds = float(np.median(result["seconds"][WARMUP:]))
    table[label] = (result["bytes"][WARMUP:], formula, seconds)
cluster.shutdown()
print(f"{'method':>13} {'bytes/step counted':>19} {'formula':>10} {'ratio':>6} "
      f"{'step time':>10}")
for label, (counted, formula, seconds) in table.items():
    ratio = table["none"][1] / formula
    print(f"{label:>13} {counted[0]:>19,} {formula:>10,} {ratio:5.1f}x "
          f"{seconds * 1e3:7.1f} ms"
          + ("" if set(counted) == {formula} else "  (counted differs!)"))

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Bytes are exact (counted equals formula), time is not. Fewer
# bytes shorten the $n\beta$ part, but every extra collective adds its α's:
# PowerSGD's three all-reduces cost $3 \cdot 2(p-1)\alpha$ = 18 ms here
# however small the factors, and compression costs compute (top-k over the
# whole gradient, QR). On a fast network the same methods can make a step
# *slower*. The step times move from run to run on a busy laptop; the bytes
# never do.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Convergence: error feedback matters
#
# Loss curves stored by notebook 08 (`LONG_RUNS = True`, 300 steps per method, same data and seeds):

# %% slideshow={"slide_type": "-"}
DATA = Path(lab.__file__).resolve().parents[1] / "notebooks/data/08_convergence.json"
stored = json.loads(DATA.read_text())


def smooth(values, window=10):
    return np.convolve(values, np.ones(window) / window, mode="valid")


fig, ax = plt.subplots(figsize=(8, 4))
for label, loss in stored["loss"].items():
    style = "--" if "no error" in label else "-"
    ax.plot(smooth(loss), style, label=label, linewidth=2.5 if label == "none" else 1.2,
            color="black" if label == "none" else None)
ax.set_xlabel("step")
ax.set_ylabel("training loss (moving average of 10 steps)")
ax.set_yscale("log")
ax.set_title(f"{stored['ranks']} ranks: compression against none (notebook 08's run)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Read from the file notebook 08 writes (training all seven
# curves takes minutes; the notebook re-trains them with `LONG_RUNS = True`).
# fp16 lies on the baseline. PowerSGD's lag shrinks as its rank grows. Top-k
# lags more, and without error feedback most: coordinates it never sends are
# never updated until they grow large. The problem is easy (all end near the
# same floor), so the difference shows on the way down; papers report no loss
# of accuracy with more care (DGC's momentum correction and warm-up).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Common mistakes
#
# - an efficiency column not recomputed; strong and weak scaling mixed up
# - top-k values summed with `all_reduce` while ranks picked different indices
# - top-k without error feedback
# - judging compression by bytes alone: extra collectives pay α each, compression costs compute
#
# **Now:** notebook 08, 40 min (exercises 08.1 and 08.2). **Next:** 09 · troubleshooting.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** In a one-day workshop this notebook is homework or replaces 05
# (INSTRUCTOR.md). Exercise 08.1 takes 10 minutes, 08.2 (top-k with error
# feedback, all-gathered) 20–25; its grader also trains the model with the
# learner's function as a DDP hook and compares the loss with uncompressed
# training. `benchmarks/compression.py` prints the same table as the live
# demo from the command line.
