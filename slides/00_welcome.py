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
# # 00 · Welcome: N ranks in one notebook
#
# Collective communication for distributed training, hands on.
#
# - every code cell **really runs on several processes** ("ranks")
# - laptop CPU: `gloo` · Ascend NPUs: HCCL · CUDA GPUs: NCCL — the same code
# - today: start 4 ranks, run a cell on each, a first `all_reduce`, a failure

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Welcome; say what the day is for: by the end learners can reason
# about their own cluster's numbers. Stress that nothing is simulated in these
# cells: four Python processes run each `%%ranks` cell. Ask who has already used
# `torchrun`: their code will run here unchanged. Learners often think they need
# a GPU for this course: they do not.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Check the machine first
#
# - versions, devices, and which backend `"auto"` picks and **why**
# - `"auto"`: `hccl` → `nccl` → `gloo`
# - on a laptop: `gloo` on the CPU

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
import labsupport as lab

lab.doctor()

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Everyone should have run this before the day (see the set-up check
# in `slides/INSTRUCTOR.md`). Walk through the last lines of the report: the
# chosen backend and the reason. Common confusion: a learner with an NVIDIA GPU
# but the CPU build of torch sees `gloo` and thinks something is broken; it is
# the right choice for that install. Anyone whose `doctor()` fails: pair them
# with a neighbour now, fix during the first exercise.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Names every rank starts with
#
# | name | meaning | torchrun variable |
# |---|---|---|
# | `rank` | this process's number, 0 … world_size−1 | `RANK` |
# | `world_size` | how many ranks | `WORLD_SIZE` |
# | `local_rank` | its number on *this machine* (which device) | `LOCAL_RANK` |
# | `device` | the `torch.device` it computes on | — |
# | `torch`, `dist` | the group already initialised | — |
#
# On 2 servers × 8 NPUs, rank 9 is local rank 1 of server 1.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The table is the whole vocabulary of the course. Ask: "on two
# servers of 8 NPUs, which NPU does rank 9 drive?" (NPU 1 of the second server).
# Learners mix up `rank` and `local_rank`: `rank` is global and names the
# process in collectives; `local_rank` picks the device. On one laptop the two
# are equal, which hides the difference.

# %% slideshow={"slide_type": "skip"}
# %load_ext labsupport

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: one cell, four ranks
#
# **Predict:** in what order will the lines appear?

# %% slideshow={"slide_type": "-"}
# %%ranks -n 4
print(f"hello from rank {rank} of {world_size} (local rank {local_rank}) on {device}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Ask for predictions before running. The first `%%ranks` cell takes
# a few seconds (4 fresh Python processes importing torch); later cells take
# milliseconds. Answer: grouped by rank, in rank order, every time — the
# launcher collects each rank's output. Warn that under `torchrun` the lines of
# different ranks interleave. A learner who expects one line is thinking of one
# process: point at the `[rank N]` prefixes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## A first collective: `all_reduce`
#
# Rank $r$ holds $x_r$; afterwards **every** rank holds $\sum_{r=0}^{p-1} x_r$, in place.
#
# **Predict:** rank $r$ holds `[10r, 10r+1, 10r+2]`. What does rank 3 print?

# %% slideshow={"slide_type": "-"}
# %%ranks
x = torch.arange(3, device=device) + 10 * rank
dist.all_reduce(x)  # the default operation is a sum
print(x.tolist())

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Answer: `[60, 64, 68]` on every rank. Two mistakes to expect:
# thinking only rank 0 gets the sum (that is `reduce`, notebook 01), and
# forgetting that the input was overwritten (keep a `clone()` if you need it).
# Mention `cluster.run(fn)`: the same code as a function, results returned to
# the notebook as a list indexed by rank — the way later notebooks collect
# numbers to plot.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## When one rank fails
#
# Rank 1 raises; ranks 0, 2, 3 wait for it in `barrier()`. The launcher shows
# rank 1's traceback, **where the others were stuck**, and restarts the ranks.

# %% slideshow={"slide_type": "-"} tags=["raises-exception"]
# %%ranks
if rank == 1:
    raise ValueError("rank 1 fails on purpose")
dist.barrier()

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask "where will ranks 0, 2 and 3 be?" before running: in
# `dist.barrier()`. Read the error together: rank 1's traceback first, then the
# stacks of the blocked ranks. After the restart every name defined in earlier
# cells is gone (`x` no longer exists): learners who re-run only the failing
# cell are surprised by a `NameError`. A *hang* (no error, nobody arrives) ends
# after `--timeout` seconds with `CollectiveTimeout`; notebook 02 makes one.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Recap, and exercise time
#
# - `lab.doctor()`: what the machine can run
# - `%%ranks` runs a cell on every rank; output grouped by rank; state kept
# - `rank`, `world_size`, `local_rank` = torchrun's `RANK`, `WORLD_SIZE`, `LOCAL_RANK`
# - a failing rank → `RankError` + stacks; a hang → `CollectiveTimeout`; the group restarts
#
# **Now:** notebook `00_welcome.ipynb`, Run All, then `%ranks shutdown`.
# **Next:** 01 · the collective primitives.

# %% slideshow={"slide_type": "skip"}
# %ranks shutdown

# %% [markdown] slideshow={"slide_type": "notes"}
# **1 min + 10 min hands-on.** Learners run notebook 00 themselves. Walk the
# room: the first `%%ranks` cell is where a broken install shows (see the
# failure points in `INSTRUCTOR.md`). Anyone finished early: try
# `%%ranks -n 8` and `%ranks status`.
