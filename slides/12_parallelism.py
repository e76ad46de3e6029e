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
# # 12 · Model parallelism and layouts at scale
#
# When the model does not fit one device, cut it, and each cut brings its collectives:
#
# - tensor (and sequence) parallelism: all-reduces of activations, inside a server
# - pipeline parallelism: send/recv between stages, and a bubble
# - expert parallelism: all-to-all, uneven
# - a layout DP × TP × PP × EP for 4096 NPUs, computed

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Notebooks 07 and 10 gave every rank the whole model. Here the
# model is cut four ways; the notebook builds each cut in `labsupport/parallel/`,
# checks it against one process and against torch's own, and measures it on
# the emulated two-level network (2 nodes of 2 ranks).

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt

from labsupport import parallel, topology
from labsupport.runtime.viz import table
from labsupport.units import format_size, format_time

A2 = parallel.Cluster("Atlas 800T A2", topology.ascend_a2)
DGX = parallel.Cluster("DGX H100", topology.dgx_h100)
W = parallel.GPT3_175B

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Tensor parallelism: f and g
#
# $Y = \mathrm{GeLU}(XA)\,B$: split $A$ by **columns**, $B$ by **rows** over $t$ ranks;
# rank $i$ computes $\mathrm{GeLU}(XA_i)B_i$, a **partial sum** of $Y$.
#
# | operator | forward | backward |
# |---|---|---|
# | **f** (enters the block) | identity | all-reduce |
# | **g** (row-parallel output) | all-reduce | identity |
#
# Two blocks per layer: **4 all-reduces of the activations per layer per micro-batch**.

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Megatron-LM (Shoeybi et al. 2019, §3). Ask the room before
# showing the table: how many all-reduces does one MLP cost forward and
# backward? The notebook prints the collectives each rank issued (one
# all-reduce each way) and checks the split MLP against the dense one, and
# against torch's `parallelize_module` with `ColwiseParallel` and
# `RowwiseParallel` on a CPU DeviceMesh over plain gloo (the emulated backend
# has no named process group, which DeviceMesh needs). Exercise 12.1 is g;
# the classic bug is an all-reduce in g's backward too: gradients t times too
# large, silently.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Sequence parallelism: same bytes, $1/t$ of the activations
#
# All-reduce = reduce-scatter + all-gather (notebook 03). So:
#
# - entering a block: **all-gather** the sequence
# - leaving it: **reduce-scatter** the partial sums along the sequence
# - in between (layer norm, dropout): each rank holds $1/t$ of the tokens

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Korthikanti et al. 2022, §4.2.2. The notebook's recording shows
# one all-gather and one reduce-scatter each way, of the same 8 KiB, where
# tensor parallelism alone had an all-reduce: the same ring traffic,
# 2(p−1)/p of the tensor per rank.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Why TP lives inside a server
#
# The same split MLP, forward + backward, TP group of 2 **inside** a node and **across** the two nodes
# of the emulated network (50 µs, 1 GB/s inside; 500 µs, 50 MB/s between):
#
# - the all-reduces alone cost several times more across (the notebook measures the ratio)
# - they sit on the critical path: the next layer needs the sum

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Every rank creates both groups (notebook 02). The notebook times
# the step and its two all-reduces alone with `time_iterations` and compares
# with the link model; the verdicts (over 4x for the all-reduces, over 1.5x
# for the step) are computed. On real hardware the gap is HCCS or NVLink
# against the NIC. Section 6 of the notebook shows the same at 4096 NPUs.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Pipelines: GPipe and 1F1B, the same bubble
#
# bubble $= \dfrac{p-1}{m}$ for both; 1F1B holds $p - s$ micro-batches on stage $s$, GPipe $m$.

# %% slideshow={"slide_type": "skip"}
def draw_pipelines():
    """Both schedules' timelines: 4 stages, 8 micro-batches, backward twice forward."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 3.0), sharex=True)
    for ax, s in zip(axes, parallel.SCHEDULES, strict=True):
        for (stage, (kind, i)), (a, b) in parallel.timeline(s, 4, 8, 1.0, 2.0).items():
            ax.broken_barh([(a, b - a)], (stage - 0.4, 0.8),
                           facecolors="tab:blue" if kind == "F" else "tab:orange")  # fmt: skip
            ax.text((a + b) / 2, stage, f"{kind}{i}", ha="center", va="center", fontsize=6,
                    color="white")  # fmt: skip
        ax.set_yticks(range(4), [f"stage {k}" for k in range(4)], fontsize=7)
        ax.set_ylim(3.5, -0.5)
        ax.set_title(f"{s}: 4 stages, 8 micro-batches", fontsize=9)
    plt.tight_layout()
    plt.show()


# %% slideshow={"slide_type": "-"}
draw_pipelines()
print("activations held, stage 0..3:",
      {s: [parallel.peak_activations(b(k, 4, 8)) for k in range(4)]
       for s, b in parallel.SCHEDULES.items()})  # fmt: skip

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** GPipe (Huang et al. 2019); 1F1B as in PipeDream-Flush
# (Narayanan et al. 2021, §2.2). Ask: which has the smaller bubble? Both the
# same; 1F1B's gain is memory. The notebook measures the bubble on the
# emulated network with emulated compute (10 ms forward, 20 ms backward) for
# m = 4, 8, 16: at least (p−1)/m, within 0.05 of the timeline with the sends,
# GPipe equal to 1F1B. It also runs torch's `ScheduleGPipe` and
# `Schedule1F1B` (on the emulated network) and checks the course's stages
# against them. A blocking send in a stage can deadlock: isend.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Experts: all-to-all with uneven splits
#
# Dispatch and combine, forward and backward: 4 all-to-alls per MoE layer per micro-batch.
#
# - first swap the counts (`all_to_all_single` of one number per rank)
# - then the tokens, with `input_split_sizes` / `output_split_sizes`
# - a hot expert: the busiest rank receives most, and everyone waits for it

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Switch Transformer (Fedus et al. 2022) routes top-1; GShard
# (Lepikhin et al. 2021) spreads experts over ranks. In the notebook 70 % of
# every rank's tokens go to rank 0's expert: the same tokens in all, and a
# slower dispatch (the ratio is measured). Capacity factors and the
# load-balancing loss exist because of this all-to-all.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## GPT-3 175B on 4096 NPUs: the layout, computed
#
# Every class of every layout timed with the topology simulator; **no overlap assumed**;
# compute rate and memory per NPU are stated assumptions, the same on both clusters.

# %% slideshow={"slide_type": "-"}
rows = []
for c in (A2, DGX):
    t, best = parallel.best(W, 4096, c)[0]
    for r in parallel.step_time(W, best, c):
        rows.append({"cluster": c.name, "layout": str(best), **r})
table(rows, columns=["cluster", "layout", "class", "where", "bytes", "time"],
      formats={"bytes": format_size, "time": format_time})  # fmt: skip

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** The workload is GPT-3 175B (Brown et al. 2020, Table 2.1), 1536
# sequences of 2048 tokens per step. On both clusters the best layout puts TP
# inside the server and DP and PP across (a test asserts it). The notebook
# shows the top six layouts, the cost of a TP group of 16 that spans two
# servers, and how the best layout changes at 64 and 512 NPUs (the DGX
# prefers TP 4 at 512: the numbers decide, not the rule). Exercise 12.2:
# GPT-3 6.7B on 128 A2 NPUs, where the best layout needs no TP at all.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Further: ASTRA-sim through Chakra
#
# ```
# chakra_converter Text --input workload.txt --output workload \
#     --num-npus 4096 --num-passes 1
# ```
#
# or from a real run: `chakra_trace_link`, then `chakra_converter PyTorch`.
# ASTRA-sim then simulates the whole step, overlap included: the gap to the sum of the classes is what overlap hides.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Described, not run: no Chakra package is on the registries the
# course installs from. The commands are those of mlcommons/chakra's user
# guide. Wrap up: notebook 11 does the data-parallel side (ZeRO-2/3, FSDP).
