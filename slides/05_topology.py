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

# %%

# %% [markdown] slideshow={"slide_type": "slide"}
# # 05 · Topology
#
# The same algorithm runs at different speeds on different wiring.
#
# - a network in ASTRA-sim's words: dimensions of Ring, FullyConnected, Switch
# - inside a server (HCCS mesh, NVLink) vs across (RoCE, InfiniBand)
# - one ring uses one link of a mesh: Mesh (HCCL), channels (NCCL)
# - a ring laid over the wiring; a hierarchical all-reduce; scale
# - `npu-smi info -t topo`, `HCCL_ALGO`, what the library chose

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Notebook 04 had one α and one β. Real clusters have (at least)
# two: fast links inside a server, slower ones between servers. Everything in
# this deck is the link-level simulator, no ranks.

# %% slideshow={"slide_type": "skip"}
from labsupport import schedules, topology
from labsupport.runtime.viz import table
from labsupport.runtime.viz.topology import draw_rings, ring_schedule, standard_rings
from labsupport.topology import simulate_on_topology
from labsupport.units import format_time

MiB = 2**20

# %% [markdown] slideshow={"slide_type": "slide"}
# ## One message: $t = \text{hops}\times\text{latency} + \text{bytes}/\text{bandwidth}$
#
# Two Atlas 800T A2 servers: 8 NPUs each, HCCS between every pair, one 200 Gb/s RoCE NIC per
# NPU, a switch every NIC reaches (`wiring="rail"` is the labelled option).

# %% slideshow={"slide_type": "-"}
a2 = topology.presets["ascend-a2-2x8"]
print(a2.describe())

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Unit trap: ASTRA-sim's GB is 2³⁰ bytes, nccl-tests' is 10⁹. Three
# things no source settles, and the preset says so: the NIC wiring (switch by
# default, rail as an option), the direction of the blog's 56 GB/s HCCS figure
# (56 each way, or 28 each way if it is a bidirectional total: the notebook
# shows both), and per-hop latencies (0 ns, flagged unknown). ASTRA-sim charges
# a message across dimensions only its first differing dimension; the course
# charges every dimension crossed.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## One ring uses one link of a mesh

# %% slideshow={"slide_type": "-"}
server = topology.presets["ascend-a2-1x8"]
rows = [{"algorithm inside one A2 server": name,
         "256 MiB": simulate_on_topology(s, server, 256 * MiB).time}
        for name, s in [("ring", schedules.ring_all_reduce(8)),
                        ("mesh (direct)", schedules.direct_all_reduce(8))]]  # fmt: skip
table(rows, formats={"256 MiB": format_time})

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** In each ring step NPU i sends to NPU i+1 only: six of its seven
# HCCS links idle. HCCL runs Mesh inside an A2 server (every link at once);
# NCCL builds several rings, its channels, each over other links
# (`NCCL_DEBUG=INFO` prints one `Channel` line per ring). "Inside is an order
# of magnitude faster" needs all 7 links, and the 56-each-way reading.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## A ring over the wiring: where ranks land

# %% slideshow={"slide_type": "-"}
axes = draw_rings(a2, standard_rings(servers=2, per_server=8))
axes[0].figure.set_size_inches(11, 3.4)

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Ask: "which ring is slower?" Most say the right one. With one NIC
# per NPU it is *not*: each hop has its own link, and a ring waits for its
# slowest hop, which crosses servers in both cases. The notebook has the same
# picture behind two knobs (ranks per server, ring order).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## One NIC per server, with congestion

# %% slideshow={"slide_type": "-"}
one_nic = topology.Topology(a2.dims, "A2, one NIC per server", uplink="shared")
rows = [{"ring": label,
         "8 NICs": simulate_on_topology(ring_schedule(order), a2, 256 * MiB, congestion=True).time,
         "1 NIC": simulate_on_topology(ring_schedule(order), one_nic, 256 * MiB,
                                       congestion=True).time}
        for label, order in standard_rings(2, 8).items()]  # fmt: skip
table(rows, formats={"8 NICs": format_time, "1 NIC": format_time})

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** With one NIC per server, 8 messages leave each server through the
# same NIC in every step of the bad ring. Exercise 05.1 asks for a ring order
# on rail-wired servers, graded on this simulator.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Hierarchical all-reduce
#
# 1. reduce-scatter inside each server (mesh: all links at once)
# 2. all-reduce across servers, one ring per local index, $1/g$ of the buffer each ($1/8$ on A2)
# 3. all-gather inside each server
#
# HCCL on multi-server A2 runs all-reduce this way; ASTRA-sim calls it `localBWAware`.

# %% slideshow={"slide_type": "-"}
hier = schedules.hierarchical_all_reduce
algorithms = {
    "flat ring": schedules.ring_all_reduce(16),
    "hierarchical, ring inside": hier(16, 8, intra="ring"),
    "hierarchical, mesh inside": hier(16, 8, intra="direct"),
}
rows = [{"2 A2 servers": name, "256 MiB": simulate_on_topology(s, a2, 256 * MiB).time}
        for name, s in algorithms.items()]  # fmt: skip
table(rows, formats={"256 MiB": format_time})

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Each rank sends only 1/g of the buffer across, and all the
# server's NICs work at once; with a ring inside, the intra-server phases use
# one HCCS link of seven. The notebook measures flat vs hierarchical on real
# ranks over an emulated 2 × 2 network, then simulates 8 × N servers up to
# 4096 ranks: the hierarchical schedule wins when the algorithm across servers
# is logarithmic (halving-doubling across, HCCL's H-D_R at level 1); with a
# ring across, 1 MiB at thousands of ranks falls far behind (2(m−1) steps). An
# all-to-all (MoE) can run in two stages, but no hierarchy reduces the bytes
# that cross servers. Section 8 writes the rail-wired network as ASTRA-sim's
# files and reads it back, same times.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## On real hardware
#
# ```bash
# npu-smi info -t topo     # X, HCCS, PIX, PXB (several PCIe switches), PHB, SYS; CPU affinity
# export HCCL_ALGO="level0:NA;level1:H-D_R"   # inter-server algorithm; level0 accepts only NA
# export ASCEND_GLOBAL_LOG_LEVEL=1 ASCEND_SLOG_PRINT_TO_STDOUT=1    # what HCCL set up
# export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING  # + algo per call, 2.20+
# export NCCL_ALGO=Ring                       # to measure the network itself
# ```
#
# **Now:** notebook 05, 35 min. **Next:** 06 · measuring bandwidth.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Setting HCCL_ALGO turns off HCCL's adaptive choice: an experiment,
# not a default. Unset, the rule depends on the product (CANN `envref_07_0079`):
# on Atlas training products (910) ring when the server count is not a power of
# two, else H-D_R; on A2 (910B) and A3 HCCL chooses by product, node count and
# data size. NCCL prints each collective's algorithm from 2.20 with
# NCCL_DEBUG_SUBSYS=TUNING (numeric ids up to 2.23, names such as `Algo RING
# proto SIMPLE` from 2.24.3); up to 2.19 it does not (NVIDIA/nccl issue 754):
# force NCCL_ALGO and compare. Mistakes circulating in popular articles,
# which the notebook corrects: `torch.npu.set_config(topology_aware=True)` and
# `NCCL_TOPOLOGY_FILE` do not exist (NCCL's variable is NCCL_TOPO_FILE), and a
# typed-in table ranking RoCE above intra-server links is not a measurement.
