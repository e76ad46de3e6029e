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
# # 02 · Point-to-point, deadlock and groups
#
# Collectives are built from messages between two ranks: one sends, one
# receives. This notebook uses those messages directly, breaks them on purpose
# (a deadlock, a mismatched collective), and then runs collectives on *part* of
# the ranks with process groups, the way a multi-node job does.
#
# **You will leave this notebook able to**
# - use `send`/`recv`, `isend`/`irecv` and `batch_isend_irecv`, and pass a token
#   around a ring;
# - cause a deadlock, read it from the per-rank stacks, and fix it two ways;
# - see a mismatched collective go silently wrong, and catch it with
#   `TORCH_DISTRIBUTED_DEBUG=DETAIL`;
# - build intra-node and inter-node groups correctly (every rank calls
#   `new_group` for every group, in the same order), or with
#   `use_local_synchronization=True`, or with a `DeviceMesh`.
#
# Notation: `p` ranks (`world_size`), ranks numbered `0 … p−1`.
# Cells that fail on purpose are marked; each one restarts the ranks, which
# takes a few seconds. **Predict, then run** prompts have their answer folded
# under the cell.

# %%
import re
import sys

import torch
import torch.distributed as dist

from labsupport.runtime.check import primitives as checks
from labsupport.runtime.launch import CollectiveTimeout, RankError
from labsupport.runtime.viz.groups import draw_groups
from labsupport.runtime.viz.waitfor import draw_wait_for

# %load_ext labsupport

# %%
# %%ranks -n 4
print(f"rank {rank} of {world_size} on {device}")

# %% [markdown]
# ## 1. send and recv
#
# `dist.send(tensor, dst)` sends a tensor to one rank; `dist.recv(tensor, src)`
# receives into a tensor that the receiver has already allocated, with the right
# size and dtype (no size travels with the message). Both are *blocking*: `send`
# returns when the tensor may be reused, `recv` when the data has arrived.

# %%
# %%ranks
if rank == 0:
    message = torch.tensor([42.0, 43.0], device=device)
    dist.send(message, dst=1)
    print("sent", message.tolist(), "to rank 1")
elif rank == 1:
    message = torch.empty(2, device=device)
    dist.recv(message, src=0)
    print("received", message.tolist(), "from rank 0")

# %% [markdown]
# ### Passing a token around a ring
# Rank 0 starts a counter and sends it to rank 1; each rank receives it from its
# left neighbour, adds one and sends it right; it comes back to rank 0 after
# `world_size` hops. The order of `send` and `recv` on each rank is what makes
# this work: every rank except 0 *receives first*, and rank 0 *sends first*, so
# there is always one rank ready to send.
#
# **Predict, then run.** With 4 ranks, what value does the token have when it
# comes back to rank 0?

# %%
# %%ranks
token = torch.zeros(1, device=device)
if rank == 0:
    token += 1
    dist.send(token, dst=1)
    dist.recv(token, src=world_size - 1)
    print(f"the token came back with {token.item():.0f}: {world_size} hops")
else:
    dist.recv(token, src=rank - 1)
    token += 1
    dist.send(token, dst=(rank + 1) % world_size)
    print(f"got the token, passed on {token.item():.0f}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# 4: rank 0 made it 1, ranks 1, 2 and 3 each added one. Rank 0's own output is
# printed first, but it was the last to finish.
# </details>
#
# ### isend and irecv: start now, wait later
# `isend`/`irecv` return at once with a request; `request.wait()` blocks until
# that transfer is done. Posting the receive and the send *before* waiting on
# either means no rank waits for another to go first. Here every rank sends to
# its right neighbour and receives from its left one, all at the same time:

# %%
# %%ranks
right, left = (rank + 1) % world_size, (rank - 1) % world_size
outgoing = torch.full((2,), float(rank), device=device)
incoming = torch.empty(2, device=device)
requests = [dist.isend(outgoing, dst=right), dist.irecv(incoming, src=left)]
for request in requests:
    request.wait()
print(f"got {incoming.tolist()} from rank {left}")

# %% [markdown]
# `batch_isend_irecv` takes a list of `P2POp`s and starts them together. On
# NCCL and HCCL that is one grouped launch (NCCL's `ncclGroupStart/End`), which
# is both faster and safe from ordering problems between the operations; on gloo
# it starts them one by one ([REFERENCES.md](../../REFERENCES.md#nccl)). The ring algorithms of notebook 03 use it.

# %%
# %%ranks
ops = [dist.P2POp(dist.isend, outgoing, right), dist.P2POp(dist.irecv, incoming, left)]
for request in dist.batch_isend_irecv(ops):
    request.wait()
print(f"batched: got {incoming.tolist()} from rank {left}")

# %% [markdown]
# ## 2. A deadlock, on purpose
#
# The same ring exchange with blocking calls, and every rank receiving first:
# every rank waits for its left neighbour's message, which that neighbour will
# only send after *its* receive completes. Nobody ever sends. The launcher gives
# the cell 3 seconds (`--timeout 3`), then raises `CollectiveTimeout` with each
# rank's Python stack, and restarts the ranks. **This cell fails on purpose.**
#
# **Predict, then run.** In which call will each rank's stack end?

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
outgoing = torch.full((2,), float(rank), device=device)
incoming = torch.empty(2, device=device)
dist.recv(incoming, src=(rank - 1) % world_size)  # everyone waits here...
dist.send(outgoing, dst=(rank + 1) % world_size)  # ...for a send that nobody reaches

# %% [markdown]
# <details><summary>Answer</summary>
#
# Every rank's stack ends in `recv`, at the line `dist.recv(incoming, src=…)`;
# none reached `send`.
# </details>
#
# **The wait-for graph.** Draw an arrow from each rank to the rank it waits for:
# the stacks say which call each rank is in, and the line says from whom it
# receives. A deadlock is a *cycle* of such arrows: everyone waits for someone
# who waits. The cell below reads the stacks that the error above carried
# (Python keeps the last error of a notebook in `sys.last_value`) and draws it.

# %%
deadlock = sys.last_value  # the error the cell above raised
assert isinstance(deadlock, CollectiveTimeout), "run the deadlock cell just above first"
fig = draw_wait_for(deadlock.stacks)

# %% [markdown]
# "Everyone sends first" is no better in general: whether a blocking `send` can
# finish before the matching `recv` is posted depends on the backend and on the
# message size (on gloo it cannot, so it hangs the same way). Code that works only
# because small messages happen to be buffered breaks when the tensors grow.
#
# **Fix 1: order the calls.** Even ranks send then receive; odd ranks receive
# then send. Every send then meets a receive that is already waiting (this works
# for an odd number of ranks too: follow the chain from the last rank).

# %%
# %%ranks
right, left = (rank + 1) % world_size, (rank - 1) % world_size
outgoing = torch.full((2,), float(rank), device=device)
incoming = torch.empty(2, device=device)
if rank % 2 == 0:
    dist.send(outgoing, dst=right)
    dist.recv(incoming, src=left)
else:
    dist.recv(incoming, src=left)
    dist.send(outgoing, dst=right)
print(f"even/odd: got {incoming.tolist()} from rank {left}")

# %% [markdown]
# **Fix 2: do not block.** Post both with `isend`/`irecv` (or
# `batch_isend_irecv`), then wait, exactly as in section 1. This is the fix to
# prefer: it does not depend on the ranks' parity, and the two transfers overlap.
#
# ## Exercise 02.1: fix a deadlocking exchange
#
# `ring_exchange(tensor)` must send `tensor` to rank `rank + 1` and return the
# tensor received from rank `rank − 1` (both modulo `world_size`). The version in
# the comment deadlocks; write one that does not. The check gives your function
# 10 seconds, so a deadlock costs you 10 seconds and a restart, nothing worse.

# %%
# Exercise 02.1: fix the deadlocking ring exchange
def ring_exchange(tensor):
    rank, size = dist.get_rank(), dist.get_world_size()
    received = torch.empty_like(tensor)
    # The deadlocking version:
    #     dist.recv(received, src=(rank - 1) % size)
    #     dist.send(tensor, dst=(rank + 1) % size)
    # BEGIN SOLUTION
    requests = [
        dist.isend(tensor, dst=(rank + 1) % size),
        dist.irecv(received, src=(rank - 1) % size),
    ]
    for request in requests:
        request.wait()
    # END SOLUTION
    return received


# %%
checks.check_ring_exchange(ring_exchange)

# %% [markdown]
# ## 3. A mismatched collective
#
# A collective only makes sense if every rank calls the same one, with the same
# shapes. Here rank 0 all-reduces 2 elements and the others 3. **This cell fails
# on purpose.**
#
# **Predict, then run.** Rank 0 calls `all_reduce` on `[1, 1]`, rank `r > 0` on
# `[r+1, r+1, r+1]`. Which ranks print a result, and what?

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
x = torch.ones(2 if rank == 0 else 3, device=device) * (rank + 1)
dist.all_reduce(x)
print("all_reduce gave", x.tolist())

# %% [markdown]
# <details><summary>Answer</summary>
#
# Only rank 0, with `[10.0, 10.0]`: the first two elements of everyone's
# contribution, `1 + 2 + 3 + 4`. Ranks 1 to 3 time out inside `all_reduce`,
# waiting for a third element. That is the worst way to fail: rank 0's result
# looks like a perfectly good sum. In a training loop, rank 0 would carry on
# into the next collective and pair it with the wrong call on the others: a
# silent corruption, or a hang far from its cause.
# </details>
#
# ### Catching it with `TORCH_DISTRIBUTED_DEBUG=DETAIL`
#
# With `TORCH_DISTRIBUTED_DEBUG=DETAIL`, PyTorch wraps the process group in a
# checker: before each collective the ranks exchange a fingerprint of the call
# (operation, shapes, dtypes, devices) and raise if they differ. It costs an
# extra collective per call, so it is for debugging, not for production runs.
#
# The variable is read when the process group is created, so the ranks must be
# *started* with it. The launcher has two ways:
# - in a cell: `%%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL` (repeat `--env` for
#   more variables) starts a new group of ranks with the variable set, and keeps
#   it for the following `%%ranks` cells;
# - in code: `lab.Cluster(world_size=4, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})`.
#
# (Under `torchrun`, set it in the shell: `TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...`.)
# Now the same cell fails fast, on every rank, saying what differs. **It fails on
# purpose.**

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL --timeout 20
x = torch.ones(2 if rank == 0 else 3, device=device) * (rank + 1)
dist.all_reduce(x)
print("all_reduce gave", x.tolist())

# %% [markdown]
# **The key fact comes last in torch's long message:** `Tensor shapes: 2vs 3`,
# after both ranks' fingerprints (`TensorShape=[2]` on one, `TensorShape=[3]` on
# the other). The launcher's summary line above puts it first; in a torchrun
# log, look for "differ in the following aspects". The cell below digs it out
# of each rank's message, one line per rank:

# %%
mismatch = sys.last_value  # the RankError the cell above raised
assert isinstance(mismatch, RankError), "run the DETAIL cell just above first"
for r, error in sorted(mismatch.errors.items()):
    differs = error.message.split("differ in the following aspects:")[-1].split()
    shapes = re.findall(r"TensorShape=(\[[^\]]*\])", error.message)
    print(f"rank {r}: {' '.join(differs)}  (mine {shapes[0]}, the other rank's {shapes[1]})")

# %% [markdown]
# ## 4. Groups: collectives on part of the ranks
#
# A job on 2 servers ("nodes") with 4 devices each has 8 ranks; a hierarchical
# AllReduce ([notebook 05](05_topology.ipynb)) needs an *intra-node* group per node and an
# *inter-node* group per local rank (the ranks with the same local rank on each
# node). On the node × local-rank grid, rows are the intra-node groups
# `{0,1,2,3}`, `{4,5,6,7}`; columns the inter-node groups `{0,4}`, `{1,5}`,
# `{2,6}`, `{3,7}`:

# %%
NODES, PER_NODE = 2, 4
node_lists = [list(range(n * PER_NODE, (n + 1) * PER_NODE)) for n in range(NODES)]
cross_lists = [list(range(local, NODES * PER_NODE, PER_NODE)) for local in range(PER_NODE)]
fig = draw_groups(
    NODES, PER_NODE, {"intra-node groups": node_lists, "inter-node groups": cross_lists}
)

# %% [markdown]
# **The rule.** `dist.new_group(ranks)` is itself a collective over *all* ranks:
# every rank must call it, for every group, in the same order, including the
# groups it is not in (there it gets `GroupMember.NON_GROUP_MEMBER` back).
#
# ### The common mistake
# Each rank creates only its own node's group, and an "inter-node" group made
# of ranks `0 … NODES−1`. Two things are wrong: the calls differ between the
# nodes (node 0's ranks create `{0,1,2,3}`, node 1's create `{4,5,6,7}`, and
# each thinks it is the same group number), and ranks `0` and `1` are both on
# node 0, so that group never crosses nodes at all. Drawn on the grid, the
# wrong "inter-node" group is two cells of one row:

# %%
fig = draw_groups(NODES, PER_NODE, {"the wrong 'inter-node' group": [list(range(NODES))]})

# %% [markdown]
# **Predict, then run.** Which ranks (if any) will print a sum, and will it be 6
# (node 0) or 22 (node 1)? **This cell fails on purpose** (8 ranks start first,
# which takes a moment).

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks -n 8 --timeout 3
NODES, PER_NODE = 2, 4
node = rank // PER_NODE
node_group = dist.new_group(list(range(node * PER_NODE, (node + 1) * PER_NODE)))  # WRONG
inter_group = dist.new_group(list(range(NODES)))  # WRONG: ranks 0 and 1 are both on node 0
x = torch.tensor([float(rank)], device=device)
dist.all_reduce(x, group=node_group)
print("sum over my node:", x.item())

# %% [markdown]
# <details><summary>Answer</summary>
#
# It changes from run to run: that is the lesson. Often some ranks hang and the
# others print 6 or 22; sometimes a rank prints a sum that mixes both nodes,
# because it joined a group with ranks of the other node. Only the construction
# below is right every time.
# </details>
#
# ### The right construction
# `dist.new_subgroups_by_enumeration(list_of_rank_lists)` calls `new_group` for
# every list, on every rank, in order, and returns the group this rank is in
# (plus all of them). Call it once for the intra-node groups and once for the
# inter-node groups:

# %%
# %%ranks
NODES, PER_NODE = 2, 4
node_lists = [list(range(n * PER_NODE, (n + 1) * PER_NODE)) for n in range(NODES)]
cross_lists = [list(range(local, NODES * PER_NODE, PER_NODE)) for local in range(PER_NODE)]
node_group, _ = dist.new_subgroups_by_enumeration(node_lists)
cross_group, _ = dist.new_subgroups_by_enumeration(cross_lists)
print(
    "node group", dist.get_process_group_ranks(node_group),
    "| cross-node group", dist.get_process_group_ranks(cross_group),
)

# %% [markdown]
# Each rank now reports the two groups it got; rank 0 draws them (rows and
# columns, as planned):

# %%
# %%ranks
from labsupport.runtime.viz.groups import draw_groups

mine = (dist.get_process_group_ranks(node_group), dist.get_process_group_ranks(cross_group))
everyone = [None] * world_size
dist.all_gather_object(everyone, mine)
if rank == 0:
    layouts = {
        "node group of each rank": [n for n, _ in everyone],
        "cross-node group of each rank": [c for _, c in everyone],
    }
    draw_groups(NODES, PER_NODE, layouts)

# %% [markdown]
# Now an `all_reduce` in each, of each rank's own number: within its node,
# across nodes, and then the node sum again across nodes.
#
# **Predict, then run.** What does rank 5 print?

# %%
# %%ranks
in_node = torch.tensor([float(rank)], device=device)
dist.all_reduce(in_node, group=node_group)
across = torch.tensor([float(rank)], device=device)
dist.all_reduce(across, group=cross_group)
both = in_node.clone()
dist.all_reduce(both, group=cross_group)
print(f"in node: {in_node.item():4.0f}   across nodes: {across.item():4.0f}   "
      f"both: {both.item():.0f}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Rank 5 is on node 1 at local rank 1: in node `4+5+6+7 = 22`, across nodes
# `1 + 5 = 6`, both `6 + 22 = 28`. The two in a row add up every rank,
# `0+…+7 = 28`, the same as one `all_reduce` over everyone: that is the idea of
# the hierarchical AllReduce.
# </details>
#
# ### Two other ways to build the same groups
#
# **`use_local_synchronization=True`.** With this flag, `new_group` is no longer
# a collective over all ranks: only the members call it, and it names the group
# after its ranks instead of after a global counter. The "each node creates its
# own group" code of the common mistake then becomes right. The price, from the
# `new_group` documentation: groups that overlap must still be created in the
# same order on every rank (here: node groups first, then cross-node groups), or
# the creation itself can deadlock ([REFERENCES.md](../../REFERENCES.md#torchdistributed)
# lists the documentation). One more trap, from torch's source
# (`_hash_ranks_to_str` in `distributed_c10d.py`): the name is a hash of the
# ranks *and of how many groups this rank already has*. Members that have
# created different numbers of groups before (after an earlier failure, say)
# compute different names and wait for each other forever. So this example
# starts from fresh ranks, where every rank has only the default group.

# %%
# %ranks restart

# %%
# %%ranks
NODES, PER_NODE = 2, 4
node, local = divmod(rank, PER_NODE)
node_ranks = list(range(node * PER_NODE, (node + 1) * PER_NODE))
cross_ranks = list(range(local, NODES * PER_NODE, PER_NODE))
my_node = dist.new_group(node_ranks, use_local_synchronization=True)  # called by members only
my_cross = dist.new_group(cross_ranks, use_local_synchronization=True)
value = torch.tensor([float(rank)], device=device)
dist.all_reduce(value, group=my_node)
print(f"node {node}: sum over my node {value.item():.0f}; "
      f"my cross-node group {dist.get_process_group_ranks(my_cross)}")

# %% [markdown]
# **A `DeviceMesh`.** `torch.distributed.device_mesh.init_device_mesh` takes the
# grid's shape and names its dimensions, and builds every group of every
# dimension for you (it calls `new_group` on every rank, in order). The group
# along the `"local"` dimension is a node; along `"node"`, a cross-node group.
# FSDP2 and tensor parallelism take such a mesh directly.

# %%
# %%ranks
from torch.distributed.device_mesh import init_device_mesh

NODES, PER_NODE = 2, 4
mesh = init_device_mesh(device.type, (NODES, PER_NODE), mesh_dim_names=("node", "local"))
print(
    "along 'local' (my node):", dist.get_process_group_ranks(mesh.get_group("local")),
    "| along 'node' (across nodes):", dist.get_process_group_ranks(mesh.get_group("node")),
)

# %% [markdown]
# Two more things to know about groups: `src`/`dst` arguments are *global* ranks
# even inside a group (`dist.get_group_rank(group, r)` translates), and a group's
# collectives must still be called by all of its members in the same order, like
# any collective.
#
# ## Exercise 02.2: node and cross-node groups for any layout
#
# Write `build_node_groups(ranks_per_node)`, to be run on every rank: it splits
# the ranks into nodes of `ranks_per_node` consecutive ranks and returns
# `(node_group, cross_group)`: the group of this rank's node, and the group of
# the ranks with this rank's local rank on every node. The check runs it on the
# 8 ranks cut into **4 nodes of 2**, and all-reduces in both groups.

# %%
# Exercise 02.2: build the node and cross-node groups
def build_node_groups(ranks_per_node):
    # BEGIN SOLUTION
    size = dist.get_world_size()
    nodes = [list(range(first, first + ranks_per_node)) for first in range(0, size, ranks_per_node)]
    cross = [list(range(local, size, ranks_per_node)) for local in range(ranks_per_node)]
    node_group, _ = dist.new_subgroups_by_enumeration(nodes)
    cross_group, _ = dist.new_subgroups_by_enumeration(cross)
    return node_group, cross_group
    # END SOLUTION


# %%
checks.check_node_groups(build_node_groups, ranks_per_node=2)

# %% [markdown]
# ## Recap
# - `send`/`recv` block; `isend`/`irecv` return a request to `wait()` on;
#   `batch_isend_irecv` starts a list of them together. A receiver allocates the
#   tensor it receives into.
# - A cycle of ranks that each wait for the previous one is a deadlock. Break it
#   by ordering the calls (even/odd) or, better, by not blocking
#   (`isend`/`irecv`). The launcher's `CollectiveTimeout` shows where each rank waits.
# - Mismatched collectives can finish on some ranks with plausible numbers:
#   `TORCH_DISTRIBUTED_DEBUG=DETAIL` (`%%ranks --env ...`, or
#   `Cluster(env=...)`) checks every call's fingerprint.
# - Every rank calls `new_group` for every group, in the same order;
#   `new_subgroups_by_enumeration` does that for a whole layout, and so does
#   `init_device_mesh`. With `use_local_synchronization=True` only the members
#   call it (overlapping groups still in one global order).
#
# ### Common mistake: each node builds only its own groups
#
# A popular article on HCCL builds its groups the way section 4's failing cell
# did: each rank calls `new_group` only for its own node's ranks, and the
# "inter-node" group is ranks `0 … nodes−1`. Both are wrong. Without
# `use_local_synchronization=True`, `new_group` is a collective over all ranks,
# so the nodes' calls do not match (a race: hangs, or groups that mix the
# nodes); and ranks `0 … nodes−1` all sit on node 0, so that group never leaves
# it. The inter-node groups are the *columns* of the grid, `{r, r + per_node,
# r + 2·per_node, …}`. Build both layouts on every rank with
# `new_subgroups_by_enumeration`, or with a `DeviceMesh`.
#
# **Where to go next:** [03 · Deriving ring AllReduce](03_ring_allreduce.ipynb):
# build an AllReduce out of this notebook's `isend`/`irecv`, chunk by chunk
# around a ring, and prove how many bytes each rank sends.

# %%
# %ranks shutdown
