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

# %%

# %% [markdown] slideshow={"slide_type": "slide"}
# # 05 · Topology
#
# The same algorithm runs at different speeds on different wiring.
#
# - a network in ASTRA-sim's words: dimensions of Ring, FullyConnected, Switch
# - intra-server (HCCS, NVLink) vs inter-server (RoCE, InfiniBand)
# - a ring laid over the wiring; a hierarchical all-reduce
# - reading `npu-smi info -t topo` and `HCCL_ALGO`

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Notebook 04 had one α and one β. Real clusters have (at least)
# two: fast links inside a server, slower ones between servers. Everything in
# this deck except the last demo is the link-level simulator, no ranks.

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import numpy as np

import labsupport as lab
from labsupport import schedules, topology
from labsupport.viz.topology import draw_topology, link_heatmap

MiB = 2**20

# %% [markdown] slideshow={"slide_type": "slide"}
# ## One message: $t = \text{hops}\times\text{latency} + \text{bytes}/\text{bandwidth}$
#
# Two Atlas 800T A2 servers: 8 NPUs each, HCCS between every pair, one 200 Gb/s RoCE NIC per NPU.

# %% slideshow={"slide_type": "-"}
a2 = topology.presets["ascend-a2-2x8"]
print(a2.describe())
ax = draw_topology(a2)

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Each server is a circle (the HCCS mesh); NPU i of every server
# shares a switch below. Per NPU: 7 HCCS links reported at 56 GB/s (a blog
# figure, say "reported"), and one 25·10⁹ B/s NIC out. Inside is more than an
# order of magnitude faster than across. Unit trap: ASTRA-sim's GB is 2³⁰
# bytes, nccl-tests' is 10⁹.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## A ring over the wiring: where ranks land matters

# %% slideshow={"slide_type": "-"}
good = list(range(16))
bad = [8 * (i % 2) + i // 2 for i in range(16)]  # NPUs 0, 8, 1, 9, ...: every hop crosses
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
draw_topology(a2, ring=good, ax=axes[0])
draw_topology(a2, ring=bad, ax=axes[1])
axes[0].set_title("ring in NPU order: 2 hops cross")
axes[1].set_title("ranks dealt to servers in turn: 16 hops cross");

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Ask: "which ring is slower?" Most say the right one. With one NIC
# per NPU it is *not*: each hop has its own link, and a ring waits for its
# slowest hop, which crosses servers in both cases. It becomes slower when
# crossings share a link: next slide.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## One uplink per server, with congestion

# %% slideshow={"slide_type": "-"}
one_nic = topology.Topology(a2.dims, "A2, one NIC per server", uplink="shared")


def in_order(order):
    """A ring all-reduce visiting the ranks in this order."""
    plain = schedules.ring_all_reduce(len(order))
    steps = tuple(st.mapped(np.array(order)) for st in plain.steps)
    return schedules.Schedule("ring", "all_reduce", len(order), len(order), steps)


results = {}
for label, order in [("ring in NPU order", good), ("ranks dealt in turn", bad)]:
    results[label] = topology.simulate(in_order(order), one_nic, 256 * MiB, congestion=True)
    print(f"{label:22s} {results[label].time * 1e3:8.2f} ms")
fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
top = max(r.link_busy.max() for r in results.values()) * 1e3
for ax, label in zip(axes, results, strict=True):
    link_heatmap(results[label], ax=ax, vmax_ms=top)
    ax.set_title(label)

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Now 8 messages leave each server through the same NIC in every
# step of the bad ring: several times slower. The heat maps (how long each
# link carried bytes) show where: the uplinks of NPU 0. Exercise 05.1 asks for
# a ring order that crosses as rarely as possible, graded on this simulator.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Hierarchical all-reduce
#
# 1. reduce-scatter inside each server (fast links)
# 2. all-reduce across servers, one rank per local index, $1/m$ of the buffer each
# 3. all-gather inside each server
#
# HCCL on multi-server A2 runs all-reduce this way; ASTRA-sim calls it `localBWAware`.

# %% slideshow={"slide_type": "-"}
for name, sched in [("flat ring", schedules.ring_all_reduce(16)),
                    ("hierarchical", schedules.hierarchical_all_reduce(16, 8, intra="ring"))]:
    print(f"{name:>12}: {topology.simulate(sched, one_nic, 256 * MiB, congestion=True).time * 1e3:8.2f} ms")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Each rank sends only 1/m of the buffer across, and all the
# server's NICs work at once (on the one-NIC network, the one uplink carries
# far less). The notebook measures flat vs hierarchical on real ranks over an
# emulated 2 × 2 network, then simulates 8 × N servers up to 4096 ranks.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## On real hardware
#
# ```bash
# npu-smi info -t topo        # X, HCCS, PIX, PHB, SYS   (nvidia-smi topo -m: NV#, PIX, PXB, PHB, NODE, SYS)
# export HCCL_ALGO="level0:NA;level1:H-D_R"    # inter-server algorithm; level0 accepts only NA
# export NCCL_ALGO=Ring                         # to measure the network itself
# ```
#
# **Now:** notebook 05, 35 min. **Next:** 06 · measuring bandwidth.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Setting HCCL_ALGO turns off HCCL's adaptive choice: an experiment,
# not a default. Unset on 910, HCCL uses ring when the server count is not a
# power of two, else H-D_R. Mistakes circulating in popular articles, which the
# notebook corrects: `torch.npu.set_config(topology_aware=True)` and
# `NCCL_TOPOLOGY_FILE` do not exist (NCCL's variable is NCCL_TOPO_FILE), and a
# typed-in table ranking RoCE above intra-server links is not a measurement.
