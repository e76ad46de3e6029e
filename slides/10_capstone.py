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
# # 10 · Capstone: your own data parallelism, checked against one process
#
# A small transformer on 4 ranks, with data parallelism you write yourself, proved
# right the way engineers do: against one process, **step by step**, within a stated tolerance.
#
# - exercise 10.1: your DDP wrapper: torch's bucket rule, buckets in order, overlapped
# - exercise 10.2: ZeRO-1 as a `torch.optim.Optimizer`: the optimizer state sharded
# - timed against torch's DDP; the same code under `torchrun`

# %% [markdown] slideshow={"slide_type": "notes"}
# **1 min.** Everything of the course comes together: broadcast (01),
# all-reduce, reduce-scatter and all-gather (03), honest timing (06), buckets
# and hooks (07). In the one-day plan the capstone is homework, graded
# afterwards with one command (last slide); this deck is the briefing.

# %% slideshow={"slide_type": "skip"}
import functools
import inspect

import matplotlib.pyplot as plt
import torch
import torch.distributed as dist
from matplotlib.ticker import MaxNLocator

import labsupport as lab
from labsupport import ddp, netem
from labsupport.runtime import capstone
from labsupport.runtime.check.capstone import check_ddp
from labsupport.runtime.experiments import ddp_runs

RANKS = 4
CFG = capstone.GPTConfig(d_model=128)  # notebook 10's model with FULL_RUN = False
TRAIN_STEPS = 12
BUCKET = 0.25  # bucket_cap_mb, MiB
FAST = netem.Network(inter=netem.Link(latency=20e-6, bandwidth=5e9), ranks_per_node=1)
cluster = lab.Cluster(RANKS, network=FAST)  # a nearly free network, as in the notebook
threads = cluster.run(ddp_runs.use_threads)  # one thread per rank on an emulated network
torch.set_num_threads(1)  # the kernel trains the one-process baseline: one thread


def plot_losses(one, ranks, label):
    """The baseline's losses as a thick line, the ranks' as dots, and the entropy floor."""
    fig, ax = plt.subplots(figsize=(10, 2.3))
    ax.plot(one, lw=4, alpha=0.35, label="one process, whole batch")
    ax.plot(ranks, "k.", ms=6, label=label)
    ax.axhline(capstone.entropy_rate(CFG), color="tab:green", ls="--", label="entropy rate")
    ax.set(xlabel="step", ylabel="loss (nats/token)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    plt.show()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The model, the data, and what "right" means

# %% slideshow={"slide_type": "-"}
print(f"model: {CFG.param_count():,} parameters, {CFG.param_bytes() / 1e6:.2f} MB; "
      f"global batch {CFG.batch} sequences of {CFG.seq_len} tokens "
      f"({CFG.batch // RANKS} per rank)")
print(f"loss of a model that knows nothing: {capstone.initial_loss(CFG):.3f}; "
      f"the best any model can do (the chain's entropy rate): "
      f"{capstone.entropy_rate(CFG):.3f}")

# %% [markdown] slideshow={"slide_type": "-"}
# The loss is a mean over tokens and each rank gets $b/p$ rows of the global batch, so
# $\displaystyle \nabla L(B) = \frac{1}{p}\sum_{r=0}^{p-1} \nabla L(B_r)$: a correct
# data-parallel run **is** the single-process computation, up to float rounding.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** A GPT-2-style decoder (two blocks), trained with AdamW in two
# parameter groups (weight decay for the matrices only, as nanoGPT) on tokens
# from a fixed random Markov chain over 64 symbols: nothing is downloaded, and
# the floor (the entropy rate) is known exactly. "Up to float rounding": the
# ranks sum in another order than one process, so compare with a tolerance,
# not `==`; the graders compare in float64, where that rounding is ~1e-13.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## As with torch's DDP: wrap, backward, step
#
# Every rank runs the same step; the wrapper is the part that makes it distributed:

# %% slideshow={"slide_type": "-"}
print(inspect.getsource(ddp_runs.train_step))

# %% [markdown] slideshow={"slide_type": "-"}
# - construction: **broadcast rank 0's parameters and buffers** (each rank built its model from its own seed)
# - `backward()` returns with every `.grad` the **mean** over the ranks (hooks, buckets in order)
# - ZeRO-1 is the optimizer: reduce-scatter, step the shard, all-gather

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** `ddp_runs.setup` seeds each rank differently on purpose: a program
# that forgets the broadcast then fails at once instead of by luck. torch's
# DDP broadcasts when it is constructed; `ddp.DDPBase` does too, and queues
# the wait at the end of backward (`queue_callback`), as torch's Reducer does.
# Exercise 10.1 writes the bucket rule (close once the cap is reached, in
# MiB), the hook that sends complete buckets in order, and the wait with the
# copy back; 10.2 the whole ZeRO-1 shard.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: what the grader says about a plausible bug
#
# Broadcast done, every gradient all-reduced... and never divided by $p$:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
class SummingDDP(ddp.DDPBase):
    def __init__(self, module, bucket_cap_mb=None, **kwargs):
        super().__init__(module, **kwargs)

    def wait_for_gradients(self):
        for p in self.params:
            dist.all_reduce(p.grad)  # BUG: the sum over the ranks, not the mean


_ = check_ddp(SummingDDP, cluster)

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask first: with AdamW, would the *loss* show this bug? Barely:
# Adam divides by the gradient's size, so ×p nearly cancels, and the weights
# stay close. That is why the grader compares the gradients and AdamW's
# moments, not only the weights, element by element, in float64, and names the
# first step and the tensors that differ, with a hint. (This class would fail
# the grader's other checks too: one all-reduce per tensor after backward, not
# one per bucket during it.) Other gamed answers it fails: a `wait()` right
# after issuing, through the Work or its future (nothing overlaps), every
# bucket sent from backward's last gradient, buckets sent in the order they
# fill. It judges the overlap by time, on its own emulated network and
# compute model, so its verdict is the same on every laptop.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: 4 ranks against one process
#
# The library's `ddp.Bucketed` (what `MyDDP` becomes), 4 ranks, next to one process on the whole batch:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
MINE = functools.partial(ddp.Bucketed, bucket_cap_mb=BUCKET)
runs = cluster.run(ddp_runs.train, MINE, CFG, TRAIN_STEPS)  # 4 ranks
one = CFG.baseline(TRAIN_STEPS)  # one process, the whole batch
plot_losses(one["losses"], runs[0]["losses"], f"{RANKS} ranks, ddp.Bucketed (library)")
gap = max((w - v).abs().max().item()
          for r in runs for w, v in zip(r["weights"], one["weights"], strict=True))
print(f"largest weight difference, any rank: {gap:.1e} (float32, AdamW eps 1e-8)")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The dots sit on the thick line: the same training. The weights
# differ by more than float32's rounding of one sum: AdamW's `m/(√v + eps)`
# turns a near-zero gradient element whose sign rounding flips into a step of
# up to `lr` either way. The notebook shows the same 3 steps in float32 (about
# 1e-5 after one step) and float64 (about 1e-14): why the graders use float64
# with AdamW's default `eps`. Common mistake: comparing only the final loss.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## ZeRO-1: shard the optimizer state
#
# ZeRO's notation: $\Psi$ = number of parameters; mixed-precision Adam holds $2\Psi + 2\Psi + K\Psi = 16\Psi$ bytes per rank ($K = 12$).
#
# | | model states per rank | sent per rank per step |
# |---|---|---|
# | DDP | $16\Psi$ | $2\frac{p-1}{p}\Psi$ elements |
# | ZeRO-1 (paper) | $4\Psi + K\Psi/p$ | the same |
# | ZeRO-1 (here, float32) | $8\Psi + 12\Psi/p$ | the same |
#
# A ZeRO-1 step: backward; **reduce-scatter** (rank $r$ gets the mean of its shard); the shard's optimizer; **all-gather** the shards into every rank's parameters.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Rajbhandari et al. (2020), stage 1. A reduce-scatter and an
# all-gather are the two halves of a ring all-reduce (notebook 03), so the
# traffic is the same, cut in two with the optimizer step in the middle. Here,
# in float32 with no master copy: parameters 4Ψ, full local gradients 4Ψ, and
# per shard its averaged gradient 4Ψ/p and two moments 8Ψ/p. The relative
# saving does not depend on the model's size. As an optimizer it works with a
# plain model; under a DDP wrapper it gets the same numbers for an all-reduce
# more. Common mistakes: all-reduce the whole gradient and keep a slice; one
# parameter group for the whole flat buffer (biases then decay).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: memory and traffic, counted on the ranks

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
memory = {"DDP": runs[0]["memory"], "ZeRO-1": cluster.run(ddp_runs.train, "zero1", CFG, 1)[0]["memory"]}
sent = {name: cluster.run(ddp_runs.traffic_per_step, s, CFG, 1)[0]
        for name, s in (("DDP", MINE), ("ZeRO-1", "zero1"))}
cluster.shutdown()
psi = CFG.param_count()
ring = 2 * (RANKS - 1) / RANKS * 4 * psi  # bytes: a ring all-reduce of float32 gradients
rows = [{"": name, "bytes per\nparameter": sum(m.values()) / psi,
         **{f"{k}\n(MB)": v / 1e6 for k, v in m.items()},
         "sent per step\n(× a ring all-reduce)": sent[name] / ring} for name, m in memory.items()]
formula = f"formula (float32): DDP 16, ZeRO-1 {8 + 12 / RANKS:.2f} bytes per parameter"
lab.viz.table(rows, formats={"bytes per\nparameter": ".2f"}, title=f"rank 0; {formula}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Each rank counts what it holds (`ddp.model_states`, each storage
# once: ZeRO-1's shard is a view of the parameters) and the emulated network
# counts what it sends (`emulator.traffic()`). The notebook draws these as bars,
# with ZeRO-1 under DDP (and torch's DDP's traffic), then times your DDP, torch's and
# ZeRO-1 on a slow emulated network, with per-rank timelines: DDP's
# all-reduces start inside backward, ZeRO-1's reduce-scatter only after it and
# its all-gather after the shard's step (one all-reduce's bytes, none hidden;
# DeepSpeed's `overlap_comm` fixes that), and models each from its own parts.
# torch's `ZeroRedundancyOptimizer` shares only the constructor: it shards whole
# parameters, relies on DDP's all-reduce and broadcasts every updated
# parameter (about 1.5× DDP's bytes).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Common mistakes, torchrun, and grading a room
#
# - no broadcast of the initial state · summing instead of averaging · buckets out of order
# - ZeRO with an all-reduce · ZeRO with one group · comparing only the final loss
#
# ```bash
# torchrun --standalone --nproc_per_node=4 examples/capstone.py --strategy bucket --check
# python -m labkit.capstone grade path/to/notebooks --ranks 4
# ```
#
# **Now:** notebook 10 (homework): exercises 10.1 and 10.2.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** `examples/capstone.py` runs the same functions under `torchrun`
# on each rank's device (`LOCAL_RANK`'s NPU or GPU with HCCL or NCCL, else
# the CPU); `--check` trains the baseline alongside, in float64. The grading
# command runs each notebook's first cell and its two exercise cells, not the
# timings, and prints one line per learner (INSTRUCTOR.md, "Grading the
# capstone over a folder of notebooks"). Run it after the day, on the instructor's machine. Close with
# questions and where to go next: overlap ZeRO-1's reduce-scatter with
# backward, then stage 2.
