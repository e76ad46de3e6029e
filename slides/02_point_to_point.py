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
# # 02 · Point-to-point, deadlock, groups
#
# - `send`/`recv`, `isend`/`irecv`, `batch_isend_irecv`
# - cause a deadlock, read it from the per-rank stacks
# - a mismatched collective: silently wrong, caught by `TORCH_DISTRIBUTED_DEBUG=DETAIL`
# - subgroups: every rank calls `new_group` for every group

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** This is the notebook where things go wrong on purpose. Tell the
# room that every failure here is safe: the launcher restarts the ranks.

# %% slideshow={"slide_type": "skip"}
import sys

from labsupport.runtime.launch import CollectiveTimeout
from labsupport.runtime.viz.groups import draw_groups
from labsupport.runtime.viz.waitfor import draw_wait_for

# %load_ext labsupport

# %% slideshow={"slide_type": "skip"}
# %%ranks -n 4
print(f"rank {rank} ready")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Blocking send and recv
#
# `send(t, dst)` returns when `t` may be reused; `recv(t, src)` when the data is in **your** buffer.
#
# **Predict:** every rank receives from its left neighbour, then sends right. What happens?

# %% slideshow={"slide_type": "-"} tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
outgoing = torch.full((2,), float(rank), device=device)
incoming = torch.empty(2, device=device)
dist.recv(incoming, src=(rank - 1) % world_size)  # everyone waits here...
dist.send(outgoing, dst=(rank + 1) % world_size)  # ...for a send nobody reaches

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** `recv` needs a buffer of the right size and dtype: no size
# travels with the message. A deadlock: after 3 s (`--timeout 3`) the launcher raises
# `CollectiveTimeout` with each rank's stack and restarts the ranks. Read one
# stack aloud: it ends in `recv`. Learners expect "everyone sends first" to be
# the fix: on gloo a blocking send waits for its receiver too, so it hangs the
# same way, at 16 B as at 4 MiB; elsewhere it depends on message size, which
# is worse (works in the test, hangs in production).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The wait-for graph: a cycle is a deadlock
#
# An arrow from each rank to the rank it waits for, read from the stacks of the error above.

# %% slideshow={"slide_type": "-"}
deadlock = sys.last_value  # the error the cell above raised
assert isinstance(deadlock, CollectiveTimeout), "run the deadlock cell just above first"
fig = draw_wait_for(deadlock.stacks)

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The same picture as in the notebook, drawn by `draw_wait_for` from
# the error's stacks. A cycle means nobody can move. Ask for two fixes before
# the next slide: order the calls by parity (even ranks send first, odd ranks
# receive first), or post both without blocking (`isend`/`irecv`, or
# `batch_isend_irecv`).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The fix: post both, then wait

# %% slideshow={"slide_type": "-"}
# %%ranks
outgoing = torch.full((2,), float(rank), device=device)
incoming = torch.empty(2, device=device)
ops = [dist.P2POp(dist.isend, outgoing, (rank + 1) % world_size),
       dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size)]
for work in dist.batch_isend_irecv(ops):
    work.wait()  # incoming is filled only after this
print(f"got {incoming.tolist()} from rank {(rank - 1) % world_size}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Nobody blocks before both operations are posted, so the ring
# shift completes. Common error: reading `incoming` before `wait()`; it may
# still hold garbage. The ring all-reduce of notebook 03 is built from exactly
# this step.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## A mismatched collective is silently wrong
#
# Rank 0 all-reduces 2 elements, rank 1 three: no error, a wrong result.
#
# ```
# %%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL
# ```
#
# makes both ranks raise "Detected mismatch between collectives on ranks".

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Not run live (the notebook runs it): with gloo, a shape mismatch
# gives a wrong sum on rank 0 and no error at all. DETAIL checks every
# collective's shape and type across ranks; it costs an extra collective per
# call, so it is a debugging switch, not a production setting.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Groups: intra-node rows, inter-node columns
#
# 2 nodes × 4 ranks. `dist.new_group(ranks)` is itself a collective over **all** ranks.

# %% slideshow={"slide_type": "-"}
NODES, PER_NODE = 2, 4
node_lists = [list(range(n * PER_NODE, (n + 1) * PER_NODE)) for n in range(NODES)]
cross_lists = [list(range(local, NODES * PER_NODE, PER_NODE)) for local in range(PER_NODE)]
fig = draw_groups(
    NODES, PER_NODE, {"intra-node groups": node_lists, "inter-node groups": cross_lists}
)

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** The rule: every rank calls `new_group` for every group, in the
# same order, even for groups it is not in (it gets `NON_GROUP_MEMBER`). The
# hierarchical all-reduce of notebooks 04–05 needs exactly these groups.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The common mistake
#
# Each rank creates only its own node's group, and an "inter-node" group of ranks 0 … NODES−1:

# %% slideshow={"slide_type": "-"}
fig = draw_groups(NODES, PER_NODE, {"the wrong 'inter-node' group": [list(range(NODES))]})

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Two bugs: the calls differ between nodes (a race: which ranks hang
# changes from run to run, and some may join a group with the *other* node's
# ranks), and ranks 0 and 1 sit on node 0, so the group never crosses nodes.
# This mistake circulates in a popular article on HCCL; the notebook runs it
# on 8 ranks so learners see the race themselves.
#
# **Now:** notebook 02, 30 min. **Next:** 03 · deriving ring all-reduce.

# %% slideshow={"slide_type": "skip"}
# %ranks shutdown
