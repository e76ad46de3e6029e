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
# # 00 · Welcome: N ranks in one notebook
#
# This course is about the communication that multi-device training lives on:
# AllReduce and its friends, how they are built, what the wiring between
# devices does to them, and how to measure them honestly. Every code cell
# *really* runs on several processes ("ranks") — on your laptop's CPU with the
# `gloo` backend, on an Ascend server with HCCL, or on CUDA GPUs with NCCL.
#
# **You will leave this notebook able to**
# - check your machine with `lab.doctor()`;
# - start a group of 4 ranks and run a cell on every one of them with `%%ranks`;
# - read per-rank output, and say what *rank*, *world size* and *local rank* mean
#   (and which `torchrun` variables carry them);
# - run a first `all_reduce`;
# - recover when one rank fails, and shut the group down.
#
# Throughout the course, **Predict, then run** asks you to decide what a cell
# will print before you run it; the answer is folded under the cell (click
# "Answer"). A wrong prediction is the fastest way to learn something.

# %% [markdown]
# ## 1. Check the machine
#
# `doctor()` reports what PyTorch sees: the versions, the devices, and which
# backend `"auto"` would choose and why: `hccl` on Ascend NPUs, `nccl` on CUDA
# GPUs, `gloo` on the CPU, the first that can run here.
#
# **Predict, then run.** Which backend will `"auto"` pick on the machine you are
# using now?

# %% tags=["nbval-ignore-output"]
import labsupport as lab

lab.doctor()

# %% [markdown]
# <details><summary>Answer</summary>
#
# On a laptop or any machine without an accelerator: `gloo`, on the CPU; on an
# Ascend server with CANN set up, `hccl`; on a GPU box, `nccl`. The report's
# last lines say which backend and why.
# </details>
#
# ## 2. Start a group of ranks
#
# `%load_ext labsupport` adds the `%%ranks` cell magic. The first `%%ranks`
# cell starts 4 worker processes (fresh Python interpreters, so it takes a few
# seconds), and they stay up: a variable defined in one `%%ranks` cell is there
# in the next, exactly like in a normal notebook — but once per rank.
#
# Each rank starts with a few names already defined:
#
# | name | meaning | torchrun variable |
# |---|---|---|
# | `rank` | this process's number in the group, 0 … world_size−1 | `RANK` |
# | `world_size` | how many ranks there are | `WORLD_SIZE` |
# | `local_rank` | its number among the ranks on *this machine* (which device it uses) | `LOCAL_RANK` |
# | `device` | the `torch.device` it computes on | — |
# | `torch`, `dist` | `torch` and `torch.distributed`, the group already initialised | — |
#
# (The `torchrun` and `torch.distributed` documentation are listed in
# [REFERENCES.md](../../REFERENCES.md#course-wide).)
#
# On one machine `rank == local_rank`. On two servers with 8 NPUs each, rank 9
# is local rank 1 of the second server: it drives that server's NPU 1.
#
# **Predict, then run.** The four ranks run the cell below at the same time. In
# what order will their lines appear?

# %%
# %load_ext labsupport

# %%
# %%ranks
import os

print(f"hello from rank {rank} of {world_size} (local rank {local_rank}) on {device}")
print("torchrun-style variables:", {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")})

# %% [markdown]
# <details><summary>Answer</summary>
#
# **Grouped by rank, in rank order**, each line tagged `[rank N]`, every time.
# In reality the four processes printed at the same time, in no particular
# order; the launcher collects each rank's output and shows it tidily. (Under
# `torchrun` the lines of different ranks interleave.)
# </details>
#
# A cell's last expression is shown per rank, as IPython would show it:

# %%
# %%ranks
x = torch.arange(3) + 10 * rank
x

# %% [markdown]
# ## 3. A first collective: `all_reduce`
#
# Every rank holds its own `x`. `dist.all_reduce(x)` adds them up element by
# element and leaves **the same sum on every rank**, in place.
#
# **Predict, then run.** With 4 ranks, `x` is `[0,1,2]`, `[10,11,12]`,
# `[20,21,22]`, `[30,31,32]`. What does each rank print?

# %%
# %%ranks
dist.all_reduce(x)  # the default operation is a sum
print(x.tolist())

# %% [markdown]
# <details><summary>Answer</summary>
#
# The same on every rank: `[0+10+20+30, 1+11+21+31, 2+12+22+32]`, that is
# `[60, 64, 68]`. Every rank's `x` was overwritten with the sum.
# </details>
#
# You can also send a function instead of a cell. `cluster.run(fn)` calls `fn`
# on every rank and returns the list of results, index = rank — handy for
# collecting numbers back into the notebook to plot them.
#
# **Predict, then run.** What list does the cell below return?

# %%
import torch.distributed as dist


def my_rank_squared():
    return dist.get_rank() ** 2


cluster = lab.current_cluster()
cluster.run(my_rank_squared)

# %% [markdown]
# <details><summary>Answer</summary>
#
# `[0, 1, 4, 9]`: entry `r` is what rank `r` returned.
# </details>
#
# ## 4. When one rank fails
#
# Distributed code fails in distributed ways: here rank 1 raises *before* the
# barrier that every rank calls. The launcher notices the error, gives the
# others a moment, shows rank 1's traceback **and where the other ranks were
# stuck**, then restarts the group. (This cell is meant to fail.)
#
# **Predict, then run.** Where will ranks 0, 2 and 3 be when the launcher
# reports rank 1's error?

# %% tags=["raises-exception"]
# %%ranks
if rank == 1:
    raise ValueError("rank 1 fails on purpose")
dist.barrier()

# %% [markdown]
# <details><summary>Answer</summary>
#
# Inside `dist.barrier()`, waiting for rank 1, which will never arrive: the
# error report shows where they were blocked, a stack ending in `barrier`
# (printed once for the three, since it is the same on each).
# </details>
#
# **Predict, then run.** The ranks were restarted. Does `x` still exist?

# %%
# %%ranks
print("still here:", "x" in dir(), rank)

# %% [markdown]
# <details><summary>Answer</summary>
#
# No (`False`): after a restart the ranks are fresh processes, so everything a
# cell defined is gone, while `rank` and the other starting names are there
# again. Re-run the cells that define what you need.
# </details>
#
# A *hang* — a rank waiting for a message that never comes — is the other
# classic failure. `%%ranks --timeout S` gives a cell `S` seconds; after that
# the launcher raises `CollectiveTimeout` with each rank's stack. Notebook 02
# makes a deadlock on purpose and reads those stacks.
#
# ## 5. Shut down
#
# The workers stop when the kernel stops, but you can stop them yourself:
# `%ranks status`, `%ranks restart` and `%ranks shutdown`.
#
# **Predict.** After `%ranks shutdown`, what would the next `%%ranks` cell do?
# <details><summary>Answer</summary>
#
# Start a fresh group of 4 ranks (a few seconds), as the first `%%ranks` cell
# of this notebook did, with nothing defined from before.
# </details>

# %%
# %ranks status

# %%
# %ranks shutdown

# %% [markdown]
# ## Recap
# - `lab.doctor()` tells what your machine can run; `"auto"` picks hccl, then
#   nccl, then gloo.
# - `%%ranks` runs a cell on every rank; output is grouped by rank; state stays
#   between cells. `cluster.run(fn)` runs a function and returns one value per rank.
# - `rank`, `world_size`, `local_rank` are torchrun's `RANK`, `WORLD_SIZE`,
#   `LOCAL_RANK`: code written here runs under `torchrun` unchanged.
# - A failing rank raises `RankError` with its traceback; a hang raises
#   `CollectiveTimeout` with stacks; either way the group restarts itself.
#
# **Where to go next:** [01 · Collective primitives](01_primitives.ipynb) —
# broadcast, reduce, all_gather, reduce_scatter, all_to_all, with pictures of
# every rank's data before and after.
