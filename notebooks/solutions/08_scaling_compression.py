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
# The exercises are **Exercise 08.1** (efficiencies from a table) and
# **Exercise 08.2** (top-k with error feedback). Sources are in
# [REFERENCES.md](../../REFERENCES.md#compression).

# %%
import inspect
import json
import platform
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import compress, costmodel, ddp, netem, scaling, trace
from labsupport.check.scaling import (
    check_efficiencies,
    check_topk_error_feedback,
    reference_efficiencies,
)

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
CFG = ddp.Config(in_features=64, hidden=512, layers=3, out_features=16, batch=64, lr=0.05)
SHAPES = [tuple(p.shape) for p in ddp.make_model(CFG).parameters()]
NBYTES = CFG.param_bytes()
print(f"model: gradients of shapes {SHAPES}, {NBYTES / 1e6:.2f} MB in all")

# %% [markdown]
# The ranks run on the `slow-ethernet` preset of `labsupport.netem` (notebook
# 04): every rank a machine of its own, 1 ms per message, 50 MB/s per link.

# %% tags=["nbval-ignore-output"]
NET = netem.resolve("slow-ethernet")
ALPHA, BETA = NET.inter.alpha, NET.inter.beta
cluster = lab.Cluster(RANKS, network=NET)
print("threads per rank:", cluster.run(ddp.use_threads)[0])
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
# So in this section the compute is *emulated*: each rank sleeps for as long as
# its rows took to compute on this machine, measured first on one rank with one
# thread; the all-reduce is real, over the emulated network. Sleeping ranks
# need no CPU, so 4 ranks behave like 4 machines.

# %% tags=["nbval-ignore-output"]
torch.set_num_threads(1)
one_rank_model = ddp.make_model(CFG)


def forward_backward(rows):
    x, y = torch.randn(rows, CFG.in_features), torch.randn(rows, CFG.out_features)
    one_rank_model.zero_grad(set_to_none=True)
    ddp.loss_fn(one_rank_model(x), y).backward()


PER_SAMPLE, FIXED = scaling.time_per_sample(forward_backward, [64, 256, 1024])
print(f"forward + backward on one thread: {FIXED * 1e3:.2f} ms + {PER_SAMPLE * 1e6:.1f} µs per row")

# %% [markdown]
# For strong scaling we choose a global batch whose compute on one rank is 4×
# the all-reduce on 4 ranks (a batch sized for *this* machine), and for weak
# scaling a quarter of it per rank. Each configuration runs on the first `p`
# ranks (`scaling.emulated_steps`): barrier, sleep, all-reduce, the slowest
# rank's time, median of 5 steps after a warm-up.

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
        runs[kind][p] = cluster.run(scaling.emulated_steps, p, compute_time(rows), NBYTES)[0]

print(f"strong: global batch {B_GLOBAL}; weak: {B_RANK} rows per rank\n")
print(f"{'':>6} {'p':>2} {'T_p measured':>13} {'T_p model':>10} {'E measured':>11} {'E model':>8}")
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

# %% [markdown]
# The efficiencies fall with `p` in both cases, and the measurement follows the
# model, above it by the emulator's own cost (on a busy laptop, milliseconds per
# message: the two `p = 4` rows are the same configuration, `B/4 = b` rows per
# rank, so any difference between them is that noise). Below 4 ranks the strong
# runs have more rows per rank than the weak ones, beyond 4 fewer: the plot
# further down shows how fast strong scaling then collapses.
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
    return [x / (c / c0 * x0) for c, x in zip(cards, throughput)]
    # END SOLUTION


# %%
check_efficiencies(efficiencies)

# %% [markdown]
# Now check the claimed column against the arithmetic (the cell uses the
# library's reference function, so it runs whether or not your exercise is done):

# %%
cards, throughput, claimed = [1, 8, 16, 32], [9.0, 64.0, 110.0, 120.0], [1.0, 0.889, 0.764, 0.521]
for c, x, e, claim in zip(cards, throughput, reference_efficiencies(cards, throughput), claimed):
    verdict = "ok" if abs(e - claim) < 0.001 else f"WRONG: {x:g} / ({c} × {throughput[0]:g}) = {e:.1%}"
    print(f"{c:>3} cards: claimed {claim:6.1%}, computed {e:6.1%}  {verdict}")

# %% [markdown]
# The same slip appears in a popular article on HCCL, with step times (strong
# scaling): 120 ms per step on one card and 9 ms on 32 cards. Its 8- and
# 16-card figures are right, its 32-card one is not:

# %%
article = {8: (18, 0.833), 16: (11, 0.682), 32: (9, 0.521)}  # cards: (ms per step, printed)
for p, (t, printed) in article.items():
    e = scaling.strong_efficiency(120, t, p)
    print(f"{p:>2} cards: 120 / ({p} × {t}) = {e:.1%}; printed {printed:.1%}"
          + ("" if abs(e - printed) < 0.001 else "  <- wrong"))

# %% [markdown]
# Always recompute an efficiency column from the times or throughputs, and ask
# whether the batch per rank was fixed (weak) or the global batch (strong): the
# two answer different questions.
#
# ### Extrapolating to large p with the α-β model
#
# The model that matched our 1, 2 and 4 ranks predicts any `p`. The ring's
# all-reduce costs `2(p−1)α + 2(p−1)/p·nβ`: its bandwidth term tends to `2nβ`
# and stays, its latency term grows without bound. A binomial-tree all-reduce
# (notebook 04) costs `2 lg p·(α + nβ)`: more bytes at small `p`, but growing
# only as `lg p`. Same compute and network as above:

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


fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, kind in zip(axes, ("strong", "weak")):
    for algorithm, style in (("ring", "-"), ("tree", "--")):
        ax.plot(p_range, model_efficiency(kind, algorithm), style, label=f"model, {algorithm}")
    t1 = runs[kind][1]
    measured = [t1 / (p * runs[kind][p]) if kind == "strong" else t1 / runs[kind][p] for p in PS]
    ax.plot(PS, measured, "o", color="black", label="measured (emulated network)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ranks p")
    ax.set_title(f"{kind} scaling" + (f", global batch {B_GLOBAL}" if kind == "strong"
                                      else f", {B_RANK} rows per rank"))
    ax.axhline(0.5, color="0.7", linewidth=0.8)
    ax.legend()
axes[0].set_ylabel("efficiency")
axes[0].set_ylim(0, 1.05)
plt.show()
tree_wins = p_range[model_efficiency("weak", "tree") > model_efficiency("weak", "ring")]
print("the tree beats the ring from p =", tree_wins[0] if len(tree_wins) else "(never here)")
for kind in ("strong", "weak"):
    ring = model_efficiency(kind, "ring")
    below = p_range[ring < 0.5]
    print(f"{kind}: the ring's efficiency falls below 50 % at p = {below[0]}" if len(below)
          else f"{kind}: the ring stays above 50 % up to p = {p_range[-1]}")

# %% [markdown]
# Strong scaling collapses first: at large `p` each rank computes almost
# nothing and the step is all communication. Weak scaling falls more slowly,
# towards `compute / (compute + 2nβ)`, until the ring's `2(p−1)α` takes over
# at a few hundred ranks; there the tree's logarithmic cost wins. (Real
# libraries switch algorithms for this reason: NCCL's double binary trees,
# HCCL's H-D_R, notebook 04.) On this slow network both fall below 50 % early;
# on a real cluster `n·β` is hundreds of times smaller, and so is the loss.
# The model knows nothing about contention or topology: notebook 05's
# simulator adds those.
#
# ## 2. Batch size moves the compute-to-communication ratio
#
# With the batch per rank `b`, compute grows with `b` while the all-reduce stays
# the same (the gradient's size does not depend on the batch). Below some `b`
# communication dominates the step; above it, compute does. Here the compute is
# **real**: two ranks (as many as this laptop's cores) each run forward and
# backward, then all-reduce all gradients over the slow network, recorded with
# `labsupport.trace`. A barrier between the two keeps the time one rank waits
# for the other's compute out of the all-reduce's span (notebook 07: a span
# includes waiting for the slowest peer). Ranks 2 and 3 sit this one out.

# %% tags=["nbval-ignore-output"]
P2 = 2
BATCHES = [16, 64, 256, 512, 1024]
split = {b: cluster.run(scaling.compute_and_comm, P2, b, CFG) for b in BATCHES}
for b in (BATCHES[0], BATCHES[-1]):
    spans = trace.merge(out["spans"] for out in split[b][:P2])
    lab.viz.plot_timeline(spans, colors={"compute": "tab:orange", "barrier": "0.7", "all_reduce": "tab:red"},
                          title=f"{b} rows per rank, {P2} ranks: compute, barrier, all-reduce")
    plt.show()

# %% tags=["nbval-ignore-output"]
compute_s = np.array([split[b][0]["compute"] for b in BATCHES])
comm_s = np.array([split[b][0]["all_reduce"] for b in BATCHES])
for b, c, m in zip(BATCHES, compute_s, comm_s):
    print(f"{b:>5} rows per rank: compute {c * 1e3:7.1f} ms, all-reduce {m * 1e3:6.1f} ms, "
          f"communication {m / (c + m):4.0%} of the step")

# %% [markdown]
# **The break-even (critical) batch.** Compute is close to a line in `b`,
# `fixed + per_row · b` (fitted to the measured points), and the all-reduce
# costs `ring(n, p)` from the α-β model whatever `b`. They are equal at
# `b* = (ring(n, p) − fixed) / per_row`; below `b*` the step is mostly
# communication, and without overlap the efficiency cannot exceed 50 %.
# The measured `b*` is where the measured ratio crosses 1 (interpolated between
# the sizes above, on a log scale).
#
# (Some papers call a different thing the "critical batch size": the batch
# beyond which larger batches stop reducing the number of training steps,
# predicted by the gradient noise scale, McCandlish et al. 2018. That one is
# about optimisation; this one is about the machine.)

# %% tags=["nbval-ignore-output"]
per_row, fixed = np.polyfit(BATCHES, compute_s, 1)
fixed = max(fixed, 0.0)
b_model = scaling.break_even_batch(per_row, fixed, NBYTES, P2, ALPHA, BETA)
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
ax.plot(fine, (fixed + per_row * fine) * 1e3, "-", color="tab:orange", label="compute, fitted line")
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
print(f"break-even batch per rank: predicted {b_model:.0f} rows, "
      + (f"measured {b_measured:.0f} rows." if b_measured else
         "measured: no crossing in this sweep (the machine was busy; run the cell again)."))
if b_measured and not 2 / 3 < b_measured / b_model < 1.5:
    print("They differ by more than 1.5x: compute is not quite a straight line in the batch "
          "(caches, and on a busy machine the load of the moment), so the line fitted to all "
          "sizes misses the crossing; the measured one is what this machine did.")

# %% [markdown]
# Below `b*` adding ranks mostly adds communication. Larger batches per rank
# help, until the optimiser stops gaining from them (the other critical batch);
# beyond that, the remaining lever is to **send fewer bytes**.
#
# ## 3. Counting bytes, and fp16
#
# `netem.traffic()` counts the payload bytes a rank has sent on the emulated
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
    before = netem.traffic()["bytes_sent"]
    dist.all_reduce(exact)
    exact /= p
    middle = netem.traffic()["bytes_sent"]
    half = compress.fp16_allreduce(grad)
    sent = torch.tensor([middle - before, netem.traffic()["bytes_sent"] - middle])
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
# **bf16 on gloo.** torch also has `bf16_compress_hook` (bfloat16 keeps
# float32's exponent range, with 8 significant bits). On gloo, DDP refuses it
# when it is registered: `register_comm_hook` checks the hook's *name* and
# requires CUDA with NCCL 2.10+ (or XPU). Yet bfloat16 tensors all-reduce fine
# on gloo in torch 2.13 (we checked; here the emulated network carries them).
# The workaround is the same few lines under another name,
# `compress.bf16_allreduce_hook`:

# %%
def try_bf16_hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    results = []
    for hook in (default_hooks.bf16_compress_hook, compress.bf16_allreduce_hook):
        model = torch.nn.parallel.DistributedDataParallel(ddp.make_model(CFG))
        try:
            model.register_comm_hook(None, hook)
            x, y = compress.teacher_batch(0, dist.get_rank(), dist.get_world_size(), CFG)
            ddp.loss_fn(model(x), y).backward()
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
# all-reduce `Q`. Two all-reduces of `(n + m)·r` numbers instead of one of
# `n·m`. It works with all-reduce because it is linear: every rank multiplies
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


for r, (errs, best) in cluster.run(powersgd_on_ranks)[0].items():
    print(f"rank {r}: relative error of P Qᵀ, steps 1-{len(errs)}: "
          + ", ".join(f"{e:.3f}" for e in errs)
          + f" (best possible, the SVD's: {best:.3f}); "
          f"numbers sent {(512 + 64) * r:>5} instead of {512 * 64}")

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
# `start_powerSGD_iter` on (at least 2 with error feedback; we use 2).
# `compress.step_bytes` is that rule as a formula. Its batched variant,
# `batched_powerSGD_hook`, fails on torch 2.13 on the CPU:

# %% tags=["nbval-ignore-output"]
def try_batched_powersgd():
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    model = torch.nn.parallel.DistributedDataParallel(ddp.make_model(CFG))
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                               start_powerSGD_iter=2)
    model.register_comm_hook(state, psgd.batched_powerSGD_hook)
    try:
        for step in range(3):
            x, y = compress.teacher_batch(step, dist.get_rank(), dist.get_world_size(), CFG)
            ddp.loss_fn(model(x), y).backward()
    except Exception as err:  # noqa: BLE001 - we want to see which error
        return f"step {step}: {type(err).__name__}: {str(err)[:120]}"
    return "three steps trained"


print("batched_powerSGD_hook:", cluster.run(try_batched_powersgd)[0])

# %% [markdown]
# (A torch bug, seen here with torch 2.13 on the CPU: `powerSGD_hook`, used
# below, works.)
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


# %%
def topk_wrong_and_right(numel=12, k=3):
    grad = torch.randn(numel, generator=torch.Generator().manual_seed(10 + dist.get_rank()))
    indices, values = compress.topk(grad, k)
    truth = compress.sparse(indices, values, numel)
    dist.all_reduce(truth)
    truth /= dist.get_world_size()
    wrong = compress.topk_allreduce_wrong(grad, k)
    right = compress.topk_allgather(grad, k)
    return {"indices": sorted(indices.tolist()), "truth": truth, "wrong": wrong, "right": right}


out = cluster.run(topk_wrong_and_right)
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
# **Exercise 08.2.** Write `topk_ef(grad, residual, k)`: it returns the average
# over the ranks of what every rank sends (a dense tensor, the same on every
# rank) and this rank's new residual. Use `compress.topk(flat, k)` (indices and
# values of the `k` largest magnitudes), `dist.all_gather` and
# `compress.sparse(indices, values, numel)` (or `index_add_`). Do not change
# `grad` or `residual` in place. The grader compares two consecutive steps with
# the reference on every rank, then trains the model with your function as a
# DDP hook (top-k of 10 %) and compares the loss with uncompressed training.

# %%
# Exercise 08.2: top-k with error feedback, all-gathered
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
# rank 1, 2 and 4 (torch's hook), top-k of 1 % with error feedback (ours). For
# each, on the slow network: the bytes all ranks sent in one step, counted by
# `netem`, next to the formula's (`compress.step_bytes`), and the median step
# time (the slowest rank's) after three warm-up steps (DDP rebuilds its buckets
# at step 1, PowerSGD compresses from step 2).

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
    result = cluster.run(compress.train, method, WARMUP + TIMED, CFG, **options)[0]
    counted = result["bytes"][WARMUP:]
    formula = compress.step_bytes(method, result["shapes"], RANKS, buckets=result["buckets"],
                                  **options)
    table[label] = {"counted": counted, "formula": formula,
                    "seconds": float(np.median(result["seconds"][WARMUP:]))}
base = table["none"]
print(f"{'method':>13} {'bytes/step counted':>19} {'formula':>10} {'ratio':>7} {'step time':>10}")
for label, row in table.items():
    exact = all(c == row["formula"] for c in row["counted"])
    print(f"{label:>13} {row['counted'][0]:>19,} {row['formula']:>10,} "
          f"{base['formula'] / row['formula']:6.1f}x {row['seconds'] * 1e3:7.1f} ms"
          + ("" if exact else "  counted differs from formula!"))

# %% tags=["nbval-ignore-output"]
fastest = min(table, key=lambda k: table[k]["seconds"])
print(f"Every counted byte equals the formula: "
      f"{all(c == r['formula'] for r in table.values() for c in r['counted'])}.")
print(f"Fastest step here: {fastest}, {base['seconds'] / table[fastest]['seconds']:.1f}x faster "
      f"than no compression. PowerSGD pays three all-reduces of 2(p-1) messages each per step, "
      f"so on a network with {ALPHA * 1e3:g} ms per message its latency is "
      f"{3 * 2 * (RANKS - 1) * ALPHA * 1e3:.0f} ms however small the factors.")

# %% [markdown]
# Bytes are exact, time is not: fewer bytes shorten the `nβ` part of the step,
# but each extra collective adds its `α`s, and the compression itself costs
# compute (a top-k over the whole gradient, QR decompositions). On a fast
# network the same methods can make a step *slower*.
#
# **Convergence.** The loss over `CONVERGENCE_STEPS` steps for each method,
# plus top-k *without* error feedback, against the uncompressed baseline (SGD
# with momentum, the same data and seeds; the data is a "teacher" network's
# outputs, `compress.teacher_batch`, so the loss can fall). The network does not
# change the losses, only the time: these runs use a fast emulated network.

# %% tags=["nbval-ignore-output"]
DATA = Path(lab.__file__).resolve().parents[1] / "notebooks" / "data" / "08_convergence.json"
CURVES = {**METHODS, "top-k 1 %, no error feedback": ("topk", {"ratio": 0.01,
                                                              "error_feedback": False})}
if LONG_RUNS:
    FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
    cluster.run(netem.set_network, FAST)
    losses = {label: cluster.run(compress.train, method, CONVERGENCE_STEPS, CFG, **opts)[0]["loss"]
              for label, (method, opts) in CURVES.items()}
    cluster.run(netem.set_network, NET)
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(json.dumps({"steps": CONVERGENCE_STEPS, "ranks": RANKS,
                                "config": repr(CFG), "torch": torch.__version__,
                                "machine": platform.machine(), "loss": losses}, indent=1))
    print(f"trained {len(CURVES)} methods for {CONVERGENCE_STEPS} steps; saved to {DATA.name}")
else:
    stored = json.loads(DATA.read_text())
    losses = stored["loss"]
    print(f"LONG_RUNS = False: loss curves read from notebooks/data/{DATA.name}, written by this "
          f"notebook with LONG_RUNS = True ({stored['steps']} steps, {stored['ranks']} ranks, "
          f"torch {stored['torch']}). Set LONG_RUNS = True to train them again.")

# %%
def smooth(values, window=10):
    return np.convolve(values, np.ones(window) / window, mode="valid")


fig, ax = plt.subplots(figsize=(8, 4.5))
for label, loss in losses.items():
    style = "-" if label == "none" else ("--" if "no error" in label else "-")
    ax.plot(smooth(loss), style, label=label, linewidth=2.5 if label == "none" else 1.2,
            color="black" if label == "none" else None)
ax.set_xlabel("step")
ax.set_ylabel("training loss (moving average of 10 steps)")
ax.set_yscale("log")
ax.set_title(f"{RANKS} ranks, same data and seeds: compression against no compression")
ax.legend(fontsize=8)
plt.show()
EARLY = 60  # a point on the way down
early = {label: float(np.mean(loss[EARLY - 10 : EARLY + 10])) for label, loss in losses.items()}
final = {label: float(np.mean(loss[-20:])) for label, loss in losses.items()}
print(f"{'':>30}  loss near step {EARLY}   final loss (last 20 steps)")
for label in losses:
    print(f"{label:>30}: {early[label]:.4f} ({early[label] / early['none'] - 1:+4.0%})"
          f"        {final[label]:.4f} ({final[label] / final['none'] - 1:+4.0%} vs none)")
ef, no_ef = early["top-k 1 %"], early["top-k 1 %, no error feedback"]
print(f"\nNear step {EARLY}, top-k without error feedback is "
      + (f"{no_ef / ef - 1:.0%} above top-k with it." if no_ef > ef else
         "not above top-k with it on this run."))

# %% [markdown]
# Read the plot with the table above. fp16's curve lies on the baseline's (its
# rounding is far below the noise of a mini-batch gradient). PowerSGD's lag
# shrinks as its rank grows. Top-k lags more, and *without* error feedback
# most: the coordinates it never sends are never updated until they grow large
# enough to be picked. This problem is easy (every method ends near the same
# floor, which is the model's, not the method's), so the difference shows on
# the way down more than at the end; on harder problems it stays (Stich et al.
# 2018). Papers report no loss of accuracy with more care than here: DGC adds
# momentum correction and a warm-up to top-k (Lin et al. 2018); PowerSGD
# reaches SGD's accuracy on its benchmarks (Vogels et al. 2019).
#
# > **Common mistakes**
# > - An efficiency column not recomputed from the throughputs (and strong and
# >   weak scaling mixed up). Recompute it: `X_p / (p·X_1)`.
# > - Top-k values summed with `all_reduce` while ranks picked different
# >   indices: the sum adds unrelated coordinates. All-gather (index, value)
# >   pairs, or agree on the indices first.
# > - Top-k without error feedback: training converges more slowly, or to a worse
# >   loss.
# > - Judging compression by bytes alone: extra collectives pay `α` each, and
# >   compression costs compute.
# > - Expecting `bf16_compress_hook` on gloo: DDP refuses it by name; use the
# >   same code under another name.
#
# ## Recap
#
# - Strong scaling `T_1 / (p·T_p)`, weak scaling `T_1 / T_p`, from throughputs
#   `X_p / (p·X_1)`. The all-reduce does not shrink with `p`, so strong
#   scaling falls first; the ring's `2(p−1)α` eventually sinks weak scaling too.
# - Compute grows with the batch per rank, the all-reduce does not: below the
#   break-even batch `b*`, communication dominates the step.
# - fp16 halves the bytes exactly, PowerSGD sends `(n+m)·r` per matrix with
#   two all-reduces (plus one for the vectors), top-k sends `k` pairs per rank
#   with all-gathers; counted bytes equal the formulas exactly.
# - Error feedback keeps aggressive compression close to the baseline.
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
