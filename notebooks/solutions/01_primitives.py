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
# # 01 · Collective primitives
#
# A *collective* is an operation that every rank of a group calls together, each
# with its own data: a sum over all ranks, a copy from one rank to all others, a
# reshuffle. Distributed training is built from a handful of them. This notebook
# runs each one on 4 ranks and draws **every rank's data before and after**.
#
# **You will leave this notebook able to**
# - predict the result of `broadcast`, `reduce`, `all_reduce` (with every
#   reduction operation), `all_gather`, `gather`, `scatter`, `reduce_scatter`,
#   `all_to_all` and `barrier` on given inputs;
# - say which results are defined on which ranks, what "in place" means, and
#   what you must not touch while an asynchronous collective is in flight;
# - say which training technique uses which collective (DDP, ZeRO/FSDP, tensor
#   parallelism, mixture of experts);
# - compute how many bytes each rank sends in each collective, which is where
#   the "bus bandwidth" factors of `nccl-tests` come from, and say what grows
#   with the number of ranks and what does not;
# - see what gloo really runs for a `reduce_scatter`, and why its numbers are
#   not NCCL's or HCCL's.
#
# Notation: `p` ranks, a buffer of `n` bytes (what `nccl-tests` calls `S`).
# Exercises (with automatic checks) are marked **Exercise 01.k**. Before many
# cells you will find **Predict, then run**: decide what the cell will print,
# run it, and only then open the answer under it.

# %%
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport.runtime.check import primitives as checks
from labsupport.runtime.launch import rank_device
from labsupport.runtime.viz.ranks import show_ranks

# %load_ext labsupport

# %% [markdown]
# Start 4 ranks, and prepare each one: `show_ranks` is the drawing helper, and
# the warnings filter is explained just below.

# %%
# %%ranks -n 4
import warnings

from labsupport.runtime.viz.ranks import show_ranks

# torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor to *_single and
# warns on the old names; torch_npu (HCCL) only has the old ones, so we keep them.
for old_name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    warnings.filterwarnings("ignore", f".*{old_name}.* is deprecated", FutureWarning)
print(f"rank {rank} of {world_size} ready on {device}")

# %% [markdown]
# **About that filter.** PyTorch 2.13 deprecates `all_gather_into_tensor` and
# `reduce_scatter_tensor` in favour of `all_gather_single` and
# `reduce_scatter_single`, and says so with a `FutureWarning` on every call.
# The course has to run unchanged on Ascend NPUs, and `torch_npu` does not offer
# the new names yet, so it uses the old ones and silences exactly that warning
# (not every warning). On a GPU-only setup with a new torch, the new names are
# the ones to use.
#
# ## 1. The primitives, one picture each
#
# In every picture, one row is one rank; the left panel is the data before the
# call, the right panel after. Colours follow values, so you can watch a value
# travel. Every cell creates its tensors on `device` (the CPU with gloo, the
# rank's NPU or GPU with HCCL or NCCL), so the notebook runs unchanged there.
#
# ### broadcast: one rank's tensor copied to every rank
# `dist.broadcast(x, src)` overwrites `x` on every rank with `src`'s `x`.
#
# **Predict, then run.** Rank `r` starts with `[10r, 10r+1, 10r+2, 10r+3]`.
# What does rank 3 hold after `broadcast(x, src=0)`?

# %%
# %%ranks
x = torch.arange(4.0, device=device) + 10 * rank  # rank r holds [10r, 10r+1, 10r+2, 10r+3]
before = x.clone()
dist.broadcast(x, src=0)
print("after:", x.tolist())
show_ranks(before, x, title="broadcast(x, src=0)")

# %% [markdown]
# <details><summary>Answer</summary>
#
# `[0, 1, 2, 3]`, rank 0's tensor: every rank's own values are overwritten.
# Only rank 0's data travels, but not only rank 0 sends: gloo's broadcast is a
# binomial tree, so with 4 ranks rank 1 forwards what it received to rank 3.
# </details>
#
# ### reduce: combine everyone's tensor, result on one rank
# `dist.reduce(x, dst=0)` sums the `x` of every rank (element by element) into
# rank 0's `x`. The other ranks' `x` is **not defined** afterwards: a backend may
# use it as scratch space, so never read it.

# %%
# %%ranks
x = torch.arange(4.0, device=device) + 10 * rank
before = x.clone()
dist.reduce(x, dst=0)  # op=dist.ReduceOp.SUM by default
if rank == 0:
    print("after, on rank 0:", x.tolist())
show_ranks(before, x if rank == 0 else "undefined", title="reduce(x, dst=0)")

# %% [markdown]
# ### all_reduce: combine everyone's tensor, result on every rank
# The workhorse of data-parallel training. In place: `x` is the input and the
# output.

# %%
# %%ranks
x = torch.arange(4.0, device=device) + 10 * rank
before = x.clone()
dist.all_reduce(x)
print("after:", x.tolist())
show_ranks(before, x, title="all_reduce(x, op=SUM)")

# %% [markdown]
# The same picture can be drawn from the notebook's side: `cluster.run(fn)`
# returns one value per rank, and `show_ranks` takes those lists directly. Here
# with another reduction, `MAX`:

# %%
def all_reduce_max():
    x = torch.arange(4.0, device=rank_device()) + 10 * dist.get_rank()
    before = x.clone()
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return before, x


cluster = lab.current_cluster()
results = cluster.run(all_reduce_max)  # [(before, after) of rank 0, of rank 1, ...]
show_ranks([b for b, _ in results], [a for _, a in results], title="all_reduce(x, op=MAX)")

# %% [markdown]
# ### all_gather: everyone gets everyone's tensor
# Two forms. The *list* form fills a list of `world_size` tensors (entry `j`
# comes from rank `j`). The *into-one-tensor* form writes rank `j`'s piece at
# offset `j × len(x)` of one flat output, which is what NCCL and HCCL do
# natively (no copies).

# %%
# %%ranks
x = torch.arange(2.0, device=device) + 10 * rank
pieces = [torch.empty(2, device=device) for _ in range(world_size)]
dist.all_gather(pieces, x)
print("list form:", [p.tolist() for p in pieces])
show_ranks(x, pieces, title="all_gather(pieces, x): list form")

# %%
# %%ranks
flat = torch.empty(2 * world_size, device=device)
dist.all_gather_into_tensor(flat, x)
print("one tensor:", flat.tolist())
show_ranks(x, flat, title="all_gather_into_tensor(flat, x)")

# %% [markdown]
# Can the list form gather pieces of *different* sizes (rank `r` sending `r + 1`
# elements)? Whether a backend allows it is its own choice. **Predict, then
# run** on gloo:

# %%
def all_gather_uneven():
    rank, p = dist.get_rank(), dist.get_world_size()
    mine = torch.ones(rank + 1, device=rank_device())
    pieces = [torch.empty(j + 1, device=rank_device()) for j in range(p)]
    try:
        dist.all_gather(pieces, mine)
        return "worked: " + str([len(piece) for piece in pieces])
    except RuntimeError as err:
        return "refused: " + str(err).splitlines()[0]


print(f"{cluster.backend}, rank 0:", cluster.run(all_gather_uneven)[0])

# %% [markdown]
# <details><summary>Answer</summary>
#
# gloo refuses: every piece must have the size of the caller's own input. For
# pieces of different sizes, pad them to the largest (and send the true
# lengths first), or use `all_to_all_single` with split sizes, as below.
# </details>

# %% [markdown]
# ### gather and scatter: to and from one rank
# `gather` is `all_gather` with the result on one rank only (the others pass
# no list). `scatter` is the reverse: rank `src` holds a list and sends entry
# `j` to rank `j`.

# %%
# %%ranks
x = torch.arange(2.0, device=device) + 10 * rank
pieces = [torch.empty(2, device=device) for _ in range(world_size)] if rank == 0 else None
dist.gather(x, pieces, dst=0)
show_ranks(x, pieces, title="gather(x, pieces, dst=0)")

# %%
# %%ranks
chunks = None
if rank == 0:
    chunks = list((torch.arange(2.0 * world_size, device=device) + 100).chunk(world_size))
x = torch.empty(2, device=device)
dist.scatter(x, chunks, src=0)
print("received:", x.tolist())
show_ranks(chunks, x, title="scatter(x, chunks, src=0)")

# %% [markdown]
# ### reduce_scatter: reduce, then each rank keeps one chunk
# Every rank holds a whole buffer of `world_size` chunks. The result on rank
# `j` is chunk `j` of the sum over ranks: the result of an `all_reduce` of
# which each rank keeps only its own share. A well-built `reduce_scatter` sends
# half the bytes of an `all_reduce` (section 4 counts them; section 4b shows
# that gloo does not do that). Again a list form and a one-tensor form.
#
# **Predict, then run.** Rank `r` holds `[10r, 10r+1, …, 10r+7]` (4 chunks of
# 2). What does rank 1 get?

# %%
# %%ranks
x = torch.arange(2.0 * world_size, device=device) + 10 * rank
mine = torch.empty(2, device=device)
dist.reduce_scatter(mine, list(x.chunk(world_size)))
print("my chunk of the sum:", mine.tolist())
show_ranks(list(x.chunk(world_size)), mine, title="reduce_scatter(mine, list_of_chunks)")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Chunk 1 is elements 2 and 3. Summed over 4 ranks: `(0+10+20+30) + 4·2 = 68`
# and `60 + 4·3 = 72`, so `[68, 72]`.
# </details>

# %%
# %%ranks
mine_too = torch.empty(2, device=device)
dist.reduce_scatter_tensor(mine_too, x)
print("same result from the one-tensor form:", torch.equal(mine, mine_too))

# %% [markdown]
# ### all_to_all: every rank sends a different chunk to every rank
# Chunk `j` of rank `i`'s input becomes chunk `i` of rank `j`'s output: a
# transpose of the (rank × chunk) grid. Mixture-of-experts layers use it to send
# each token to the rank that holds its expert. The single-tensor form splits
# one tensor into equal chunks unless you give split sizes (below); the list
# form takes lists of tensors.
#
# **Predict, then run.** Rank `r` holds `[10r, 10r+1, 10r+2, 10r+3]`, one
# element per chunk. What does rank 2 hold afterwards?

# %%
# %%ranks
x = torch.arange(1.0 * world_size, device=device) + 10 * rank  # chunk j = [10·rank + j]
y = torch.empty(world_size, device=device)
dist.all_to_all_single(y, x)
print("after:", y.tolist())
show_ranks(x, y, title="all_to_all_single(y, x)")

# %% [markdown]
# <details><summary>Answer</summary>
#
# `[2, 12, 22, 32]`: element 2 of every rank, in rank order (column 2 of the
# grid became row 2).
# </details>

# %%
# %%ranks
outs = [torch.empty(1, device=device) for _ in range(world_size)]
dist.all_to_all(outs, list(x.chunk(world_size)))
print("list form agrees:", torch.equal(torch.cat(outs), y))

# %% [markdown]
# Both forms run on gloo with torch 2.13, as the two cells above show. That is
# recent for the list form: gloo has had `all_to_all_single` since 2020, but
# refused the list form (`ProcessGroup gloo does not support alltoall`) until
# 2026; with an older torch, use `all_to_all_single` on gloo (the pull
# requests and issue are in [REFERENCES.md](../../REFERENCES.md#torchdistributed)).
#
# **Unequal chunks: how mixture-of-experts sends tokens.** In a real MoE layer
# each rank sends a different number of tokens to each expert's rank, decided
# by the router at run time. `all_to_all_single(out, inp, output_split_sizes,
# input_split_sizes)` takes the sizes, but the receiver must know them before it
# can allocate `out`. So MoE dispatch is two all-to-alls: first the counts (one
# number per peer, equal sizes), then the tokens. Here rank `r` sends
# `(2r + j) % 3 + 1` tokens to rank `j`, each token holding `100·r + j`.
#
# **Predict, then run.** How many tokens does rank 0 receive, and from whom?

# %%
# %%ranks
send_counts = torch.tensor([(2 * rank + j) % 3 + 1 for j in range(world_size)], device=device)
recv_counts = torch.empty_like(send_counts)
dist.all_to_all_single(recv_counts, send_counts)  # step 1: who sends me how many
tokens = torch.cat(
    [torch.full((int(c),), 100.0 * rank + j, device=device) for j, c in enumerate(send_counts)]
)
received = torch.empty(int(recv_counts.sum()), device=device)
dist.all_to_all_single(  # step 2: the tokens themselves, unequal chunks
    received, tokens,
    output_split_sizes=recv_counts.tolist(), input_split_sizes=send_counts.tolist(),
)
print(f"send {send_counts.tolist()}, receive {recv_counts.tolist()}: {received.tolist()}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Rank `r` sends `(2r + 0) % 3 + 1` tokens to rank 0: 1 from rank 0, 3 from
# rank 1, 2 from rank 2, 1 from rank 3, so 7 tokens, in rank order
# (`0`, `100, 100, 100`, `200, 200`, `300`). Each rank's receive counts are a
# column of the grid of send counts (one row per rank), as for equal chunks.
# </details>
#
# ### barrier: wait until everyone is here
# No data moves; every rank leaves `barrier()` only once all ranks have entered
# it. Here rank `r` arrives `0.2·r` s late: every rank leaves at about the time
# the last one arrives. (Times differ from run to run.)

# %% tags=["nbval-ignore-output"]
# %%ranks
import time

dist.barrier()
start = time.perf_counter()
time.sleep(0.2 * rank)
arrived = time.perf_counter() - start
dist.barrier()
left = time.perf_counter() - start
print(f"arrived at {arrived:.2f} s, left at {left:.2f} s")

# %% [markdown]
# ## 2. Reduction operations, and what each backend supports
#
# `reduce`, `all_reduce` and `reduce_scatter` take `op=dist.ReduceOp.…`. The
# function below tries every one on this cluster's backend, with rank `r`
# holding `[r + 1, 2**r]` (as floats for arithmetic, as integers for the
# bitwise operations), and reports the result or the error.
#
# **Predict, then run.** With 4 ranks, what do `PRODUCT` and `BXOR` give?

# %%
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def try_every_op():
    rank, results = dist.get_rank(), {}
    for name in OPS:
        dtype = torch.int64 if name.startswith("B") else torch.float32
        x = torch.tensor([rank + 1, 2**rank], dtype=dtype, device=rank_device())
        try:
            dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
            results[name] = str(x.tolist())
        except Exception as exc:  # a backend that refuses an op raises here
            results[name] = f"refused ({str(exc).splitlines()[0][:60]})"
    return results


table = cluster.run(try_every_op)
print(f"backend: {cluster.backend}, {cluster.world_size} ranks; rank r holds [r + 1, 2**r]")
for name in OPS:
    same = all(t[name] == table[0][name] for t in table)
    print(f"  {name:8} -> {table[0][name]}" + ("" if same else "   (differs between ranks!)"))

# %% [markdown]
# <details><summary>Answer</summary>
#
# The inputs are `[1,1]`, `[2,2]`, `[3,4]`, `[4,8]`. `PRODUCT`: `[24, 64]`.
# `BXOR`: `1^2^3^4 = 4` and `1^2^4^8 = 15`, so `[4, 15]`. (`BOR` of 1, 2, 3, 4 is
# `0b111 = 7`.)
# </details>
#
# **Backends differ.** gloo supports all eight (it gained `AVG` and the list
# form `reduce_scatter` in 2025, PyTorch PRs 149781 and 149869, listed in
# [REFERENCES.md](../../REFERENCES.md#torchdistributed); older versions refuse
# them; `reduce_scatter_tensor` is older: since PR 118911, 2024, it is an
# all_reduce of the whole buffer, section 4b). HCCL, through `torch_npu`, supports `SUM`, `PRODUCT`, `MIN` and `MAX`
# natively, emulates `AVG` as a `SUM` followed by a division, and **refuses**
# `BAND`, `BOR` and `BXOR`; run this cell on an Ascend machine to see it. NCCL
# also has `PREMUL_SUM` (multiply by a factor, then sum), which gloo refuses.
# (Sources: [REFERENCES.md](../../REFERENCES.md#hccl-and-torch_npu), and
# [NCCL](../../REFERENCES.md#nccl).)
# So: if your code must run everywhere, stick to `SUM` (then divide yourself,
# which is what `AVG` does on HCCL anyway), `MIN`, `MAX` and `PRODUCT`.

# %% [markdown]
# ## 3. In place, out of place, and asynchronous calls
#
# **In place or not.** `all_reduce`, `broadcast` and `reduce` overwrite their
# tensor: keep a `clone()` if you still need the input. `all_gather`,
# `reduce_scatter`, `gather`, `scatter` and `all_to_all` write into a separate
# output and leave the input alone. NCCL-style libraries also allow an
# *in-place* `all_gather_into_tensor`: the input is this rank's own slice of the
# output, so nothing needs copying in:

# %%
# %%ranks
out = torch.zeros(2 * world_size, device=device)
my_slice = out[2 * rank : 2 * rank + 2]  # a view into out, not a copy
my_slice.fill_(rank + 1)
dist.all_gather_into_tensor(out, my_slice)
print(out.tolist())

# %% [markdown]
# **Asynchronous calls.** With `async_op=True` a collective returns at once with a
# `Work` handle; the communication proceeds in the background until you call
# `work.wait()`. Meanwhile you can compute on *other* tensors: that is how DDP
# hides gradient communication behind the backward pass (notebook 07).
#
# Until `wait()` returns, the tensors the collective uses are **off limits**:
# - reading the output gives an unspecified mix of old and new values;
# - writing the input changes what the other ranks receive;
# - freeing or reusing the buffer is a use-after-free waiting to happen.
#
# (On NPUs and GPUs, `wait()` makes the *current stream* wait, not the CPU;
# notebook 06 shows why timing then needs a device synchronize.)
#
# **Predict, then run.** The cell below reads `big[-1]` while an `all_reduce`
# of 4 ranks' ones is in flight. What value can it see?

# %% tags=["nbval-ignore-output"]
# %%ranks
big = torch.ones(2_000_000, device=device)
work = dist.all_reduce(big, async_op=True)
peek = big[-1].item()  # DON'T: the collective may not be finished yet
other = torch.randn(500, 500, device=device) @ torch.randn(500, 500, device=device)  # fine
work.wait()
print(f"peeked {peek} while in flight; after wait(): {big[-1].item()} "
      f"(completed: {work.is_completed()})")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Any of them: 1.0 (not yet reduced), 4.0 (done), or something in between on a
# backend that reduces in steps; it can change from run to run, which is exactly
# why it is a bug. After `wait()` it is always 4.0.
# </details>
#
# ## Exercise 01.1: predict
#
# Here is a sequence of collectives. Without running it, work out what it
# returns on each of 4 ranks, and write your prediction in `predict_mystery`: a
# list with one entry per rank, each a list of 3 numbers. (A formula in
# `world_size` is welcome but not required: `[[...], [...], [...], [...]]` for 4
# ranks is fine.)

# %%
def mystery():
    rank, p = dist.get_rank(), dist.get_world_size()
    x = torch.tensor([float(rank), 1.0], device=rank_device())
    dist.all_reduce(x)  # step 1
    x[0] += rank  # step 2
    dist.broadcast(x, src=p - 1)  # step 3
    y = torch.arange(float(p), device=rank_device()) + x[0] * rank  # step 4
    z = torch.empty(1, device=rank_device())
    dist.reduce_scatter(z, list(y.chunk(p)))  # step 5
    return torch.cat([x, z]).cpu()


# %%
# Exercise 01.1: predict what mystery() returns on each rank
def predict_mystery(world_size):
    # BEGIN SOLUTION
    p = world_size
    x0 = p * (p - 1) / 2 + (p - 1)  # sum of the ranks, plus rank p-1's own rank (broadcast)
    return [[x0, p, x0 * p * (p - 1) / 2 + p * r] for r in range(p)]
    # END SOLUTION


# %%
checks.check_prediction(predict_mystery, mystery)

# %% [markdown]
# ## Exercise 01.2: all_gather from broadcast alone
#
# Write `all_gather_with_broadcast(tensor)`, which returns the same list as
# `dist.all_gather` (entry `j` = rank `j`'s tensor), using only `dist.broadcast`.
# Hints: every rank must take part in every broadcast; think about which buffer
# each broadcast writes into, and do not hand back the same tensor twice.

# %%
# Exercise 01.2: implement all_gather with broadcast
def all_gather_with_broadcast(tensor):
    # BEGIN SOLUTION
    out = []
    for src in range(dist.get_world_size()):
        buf = tensor.clone() if src == dist.get_rank() else torch.empty_like(tensor)
        dist.broadcast(buf, src=src)
        out.append(buf)
    return out
    # END SOLUTION


# %%
checks.check_all_gather_with_broadcast(all_gather_with_broadcast)

# %% [markdown]
# Whether or not your version passes yet, compare it with the real thing: built
# from broadcasts, an `all_gather` is `p` broadcasts in a row, each one reaching
# every rank from a single source, while a real `all_gather` moves every piece
# only as far as it needs to, all pieces at once. Section 4 counts the bytes.
#
# ## Exercise 01.3: reduce_scatter from all_reduce and slicing
#
# Write `reduce_scatter_with_all_reduce(tensor)`: `tensor` has `world_size`
# equal chunks; return this rank's chunk of the sum over ranks, like
# `dist.reduce_scatter`, using `dist.all_reduce` and slicing.

# %%
# Exercise 01.3: implement reduce_scatter with all_reduce and slicing
def reduce_scatter_with_all_reduce(tensor):
    # BEGIN SOLUTION
    total = tensor.clone()
    dist.all_reduce(total)
    return total.chunk(dist.get_world_size())[dist.get_rank()]
    # END SOLUTION


# %%
checks.check_reduce_scatter_with_all_reduce(reduce_scatter_with_all_reduce)

# %% [markdown]
# ## 4. How many bytes does each rank send?
#
# Take a buffer of `n` bytes on `p` ranks and ask: at the very least, how many
# bytes must each rank send (and, by symmetry, receive) for the result to be
# complete? Here `n` is what `nccl-tests` calls the size `S` (its
# `doc/PERFORMANCE.md`): the buffer for `all_reduce`, `broadcast` and `reduce`,
# the **whole** output for `all_gather`, the **whole** input for
# `reduce_scatter`, the whole buffer for `all_to_all`.
#
# - `all_gather`: each rank lacks the other `p − 1` pieces of size `n/p`.
# - `reduce_scatter`: each rank's chunk (`n/p`) needs a contribution from each
#   of the other `p − 1` ranks.
# - `all_reduce` = `reduce_scatter` + `all_gather`: twice that.
# - `all_to_all`: each rank keeps `1/p` of its buffer and sends the rest.
# - `broadcast`, `reduce`, `send/recv`: these are not symmetric. Only the
#   root must send (broadcast) or receive (reduce) all `n` bytes. In a
#   broadcast tree a leaf sends nothing; in a reduce every rank but the root
#   sends its `n` bytes (raw or partly added) at least once, leaves included.
#   The factor 1 is the root's link. (With pipelining, cutting
#   the buffer into small pieces passed along a chain, every link carries `n`
#   once and no link more.)
#
# So the function below gives the bytes sent by *the busiest rank*, which for the
# symmetric collectives is every rank.
#
# **Predict, then run.** As `p` grows, what happens to the bytes each rank
# sends in an `all_reduce`: do they grow like `p`, like `log p`, or not at all?

# %%
def bytes_sent_per_rank(collective, n, p):
    """Least bytes the busiest rank sends for a buffer of n bytes on p ranks."""
    piece = n / p
    return {
        "all_gather": (p - 1) * piece,
        "reduce_scatter": (p - 1) * piece,
        "all_reduce": 2 * (p - 1) * piece,
        "all_to_all": (p - 1) * piece,
        "broadcast": n,
        "reduce": n,
        "send/recv": n,
    }[collective]


n = 2**20  # 1 MiB
ranks = [2, 4, 8, 16, 1024]
print(f"bytes sent by the busiest rank, as a multiple of n = {n} bytes "
      "(the nccl-tests busbw factor)")
print(f"{'collective':16}" + "".join(f"{'p=' + str(p):>9}" for p in ranks))
for collective in ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast"]:
    factors = [bytes_sent_per_rank(collective, n, p) / n for p in ranks]
    print(f"{collective:16}" + "".join(f"{f:9.4f}" for f in factors))
steps = "".join(f"{2 * (p - 1):9d}" for p in ranks)
print(f"{'ring steps':16}{steps}   (all_reduce on a ring)")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Not at all: `2(p−1)/p · n` approaches `2n` from below, so the bytes per rank
# of a bandwidth-optimal `all_reduce` are bounded whatever `p` is.
# </details>
#
# These ratios are exactly the *bus bandwidth* factors of `nccl-tests`
# ([REFERENCES.md](../../REFERENCES.md#bandwidth-and-benchmarking)):
# `busbw = algbw × factor`, with `algbw = S / time`. If one collective takes
# time `t`, each rank pushed `factor × S` bytes through its link in `t`, so
# `busbw` is the speed each link actually ran at, comparable with the link's
# rated bandwidth whatever `p` is (notebook 06 measures it).
#
# **What scales and what does not.** The bytes per rank stay below `2n`: the
# *bandwidth* term of an all-reduce does not grow with `p`. The number of
# *messages* does. A ring all-reduce takes `2(p − 1)` steps (last row above), and
# each step pays a latency `α`, so its time is
# `2(p−1)α + 2(p−1)/p · n/B` (Thakur, Rabenseifner & Gropp 2005, in
# [REFERENCES.md](../../REFERENCES.md#cost-models-and-algorithms)). With 1024
# ranks that is 2046 latencies in a row: fine for gigabytes of gradients, ruinous
# for small messages. That is why large systems use trees or recursive halving and
# doubling, which need only about `2 lg p` steps, or a hierarchy of rings, which
# cuts the `2(p − 1)` steps to `2(g − 1) + 2(p/g − 1)` for groups of `g` ranks
# (notebooks 03 and 04 derive and measure both terms).
#
# ## Exercise 01.4: what does Exercise 01.3's shortcut cost?
#
# Write `extra_bytes_sent(n_bytes, world_size)`: how many bytes **more** each
# rank sends when `reduce_scatter` of an `n_bytes` input is done as an
# `all_reduce` plus slicing, compared with a bandwidth-optimal `reduce_scatter`?
# Then answer in one sentence below: where do those extra bytes go?

# %%
# Exercise 01.4: compute the extra bytes each rank sends with all_reduce + slicing
def extra_bytes_sent(n_bytes, world_size):
    # BEGIN SOLUTION
    p = world_size
    return 2 * (p - 1) / p * n_bytes - (p - 1) / p * n_bytes
    # END SOLUTION


# %%
checks.check_extra_bytes(extra_bytes_sent)

# %% [markdown]
# **Your answer:** <!-- BEGIN SOLUTION -->The extra `(p − 1)/p · n` bytes are an
# `all_gather` of the reduced chunks: the `all_reduce` delivers the whole sum to
# every rank, and then every rank throws away all but its own chunk, so half of
# the traffic carries data nobody uses.<!-- END SOLUTION -->

# %% [markdown]
# ### 4b. What gloo really runs for a reduce_scatter
#
# Section 4 gave the ideal. A backend is free to do less well, and gloo does:
# it implements `reduce_scatter` with exactly the shortcut of Exercise 01.3.
# We can see it without reading gloo's source: PyTorch's profiler records, on
# each rank, the operation every collective turned into inside the backend,
# with its input shape. The events are named after the backend in use
# (`gloo:all_reduce` here, `nccl:…` or `hccl:…` on a GPU or an NPU), so the
# cell keeps those of `dist.get_backend()` and runs unchanged there. Here each
# rank's input has `p × 1024` elements.
#
# **Predict, then run.** Which gloo operation(s), on how many elements, does
# each call become?

# %%
import os

OPS_TO_PROFILE = {
    "reduce_scatter_tensor(out, x)": lambda out, x: dist.reduce_scatter_tensor(out, x),
    "reduce_scatter(out, chunks)": lambda out, x: dist.reduce_scatter(
        out, list(x.chunk(len(x) // len(out)))
    ),
    "all_reduce(x)": lambda out, x: dist.all_reduce(x),
    "all_gather_into_tensor(x, out)": lambda out, x: dist.all_gather_into_tensor(x, out),
}


def backend_operations():
    """On this rank: what each collective ran inside the backend, as (operation, elements)."""
    from torch.profiler import profile

    from labsupport.runtime import bench
    from labsupport.runtime.trace import backend_ops  # keeps the events named "<backend>:..."

    os.environ["KINETO_LOG_LEVEL"] = "7"  # the profiler's own log lines off
    p, runs = dist.get_world_size(), {}
    for name, call in OPS_TO_PROFILE.items():
        out, x = torch.empty(1024, device=rank_device()), torch.ones(p * 1024, device=rank_device())
        with profile(record_shapes=True) as prof:
            call(out, x)
            bench.synchronize(x.device)  # on a device, let the work finish inside the profile
        runs[name] = backend_ops(prof.events(), dist.get_backend())  # gloo:, nccl: or hccl:
    return runs


backend_runs = cluster.run(backend_operations)[0]  # the same on every rank: rank 0's
p = cluster.world_size
for name, ops in backend_runs.items():
    kinds = sorted({op for op, _ in ops}) or [f"no {cluster.backend}: event recorded"]
    print(f"{name:32} -> {len(ops)} x {', '.join(kinds)}, elements: {[size for _, size in ops]}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# `reduce_scatter_tensor` is one `gloo:all_reduce` of the **whole** input
# (`p × 1024` elements), after which each rank keeps its chunk; the list form is
# one `all_reduce` of `1024` elements *per rank* (`p` of them, each of which only
# one rank keeps). Either way each rank sends what an `all_reduce` sends, not
# what a `reduce_scatter` needs. (On NCCL or HCCL the cell lists that
# backend's own events instead.)
# </details>
#
# So on gloo, every rank sends the extra bytes of Exercise 01.4 (computed
# here from section 4's function):

# %%
for p_ in (2, 4, 8):
    ratio = bytes_sent_per_rank("all_reduce", n, p_) / bytes_sent_per_rank("reduce_scatter", n, p_)
    print(f"p={p_}: gloo's reduce_scatter sends {ratio:.1f}x the bytes "
          "a bandwidth-optimal one needs")

# %% [markdown]
# NCCL and HCCL implement `reduce_scatter` as its own ring (or mesh) algorithm
# and send only `(p−1)/p · n`. Keep this in mind when you measure: a
# `reduce_scatter` bandwidth measured on gloo is not comparable with one
# measured on NCCL or HCCL (notebook 06).
#
# ## 5. Who uses what in training
#
# | technique | collective | what travels |
# |---|---|---|
# | data parallel (DDP) | `all_reduce` | gradients, averaged after (or during) the backward pass |
# | ZeRO-1/2 | `reduce_scatter` + `all_gather` | gradients reduced to the rank that owns each optimizer shard; updated parameters gathered back |
# | ZeRO-3 / FSDP | `all_gather` + `reduce_scatter` | parameters gathered just before each layer runs; gradients reduce-scattered to their shard's owner |
# | tensor parallel (Megatron-style) | `all_reduce` (or `all_gather` + `reduce_scatter` with sequence parallelism) | partial activations after a split matrix multiply, and their gradients |
# | mixture of experts (expert parallel) | `all_to_all` | tokens to the rank holding their expert, and back |
# | pipeline parallel | `send` / `recv` | activations forward, gradients backward, between neighbouring stages (notebook 02) |
# | initialisation, checkpoints | `broadcast`, `barrier` | initial weights from rank 0; "everyone is done writing" |
#
# (The papers behind each row are listed in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding).)
#
# Section 4's numbers tell you what each costs. Call `Ψ` the bytes of the
# model's parameters (and so of its gradients).
#
# **Predict, then run.** Per training step, does ZeRO-3 (parameters sharded too,
# gathered for the forward pass *and again* for the backward pass) send more
# than DDP, and by how much?

# %%
def bytes_per_step(technique, psi, p):
    """Bytes each rank sends per step for a model of psi bytes on p ranks (ideal collectives)."""
    gather = bytes_sent_per_rank("all_gather", psi, p)
    scatter = bytes_sent_per_rank("reduce_scatter", psi, p)
    return {
        "DDP": bytes_sent_per_rank("all_reduce", psi, p),  # gradients
        "ZeRO-1/2": scatter + gather,  # gradients to their shard's owner, updated parameters back
        # ZeRO-3: parameters for forward, again for backward; gradients to their owner
        "ZeRO-3": gather + gather + scatter,
    }[technique]


psi, p = 2**30, 8  # a 1 GiB model on 8 ranks
for technique in ("DDP", "ZeRO-1/2", "ZeRO-3"):
    sent = bytes_per_step(technique, psi, p)
    ratio = sent / bytes_per_step("DDP", psi, p)
    print(f"{technique:9} {sent / 2**30:5.3f} GiB per rank per step = {ratio:.2f}x DDP")

# %% [markdown]
# <details><summary>Answer</summary>
#
# ZeRO-1 and ZeRO-2 send exactly what DDP sends (a `reduce_scatter` plus an
# `all_gather` is an `all_reduce` cut in two); ZeRO-3 sends 1.5× as much, because
# the parameters are gathered twice. This is the ZeRO paper's own count: DDP and
# ZeRO-1/2 move `2Ψ`, ZeRO-3 `3Ψ` (Rajbhandari et al. 2020, §7, in
# [REFERENCES.md](../../REFERENCES.md#overlap-ddp-and-sharding)). ZeRO-3 buys its
# memory saving (`1/p` of the parameters per rank) with that extra all-gather.
# </details>

# %% [markdown]
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/reduce_ops.py` (`COMBINE`): what each `ReduceOp` does when two pieces meet.
# - `labsupport/dist_names.py` (`CALLS`, `RENAMED`): the names of torch.distributed's communication functions, and the two renamed ones.

# %% [markdown]
# ## Recap
# - `broadcast`/`scatter` go out from one rank, `reduce`/`gather` come in to one
#   rank, the `all_` versions leave the result on every rank, `reduce_scatter`
#   leaves one chunk of the sum on each, and `all_to_all` transposes chunks.
# - Only the destination's result of `reduce`/`gather` is defined. `all_reduce`,
#   `broadcast` and `reduce` are in place; the others write separate outputs.
# - With `async_op=True`, hands off the tensors until `work.wait()`.
# - gloo supports every `ReduceOp` here; HCCL emulates `AVG` and refuses the
#   bitwise ones: the table in section 2 tells you what *your* backend does.
# - Per rank, a bandwidth-optimal `all_reduce` sends `2(p−1)/p · n` bytes,
#   `reduce_scatter`, `all_gather` and `all_to_all` `(p−1)/p · n`; for
#   `broadcast` and `reduce` the root's link carries `n`: the busbw factors of
#   `nccl-tests`. The bytes stay bounded as `p` grows; the number of steps (and
#   so the latency) does not.
# - gloo runs `reduce_scatter` as an `all_reduce` plus a slice: the shortcut of
#   Exercise 01.3, with the extra traffic of Exercise 01.4.
# - `all_to_all_single` with split sizes is MoE's dispatch: counts first, then
#   tokens. ZeRO-3 sends 1.5× DDP's bytes; ZeRO-1/2 the same as DDP.
#
# ### Common mistake: group constants that do not exist
#
# A popular article on HCCL tells you to build groups with a
# `dist.GroupMember.NON_INCLUSIVE_GROUP` and to turn on
# `torch.npu.set_config(topology_aware=True)`. Neither exists, in PyTorch or in
# `torch_npu`, and code using them fails with `AttributeError` on the first line.
# `GroupMember` has two members, `WORLD` and `NON_GROUP_MEMBER`; check it
# yourself instead of trusting an article (or this course):

# %%
for name in ("WORLD", "NON_GROUP_MEMBER", "NON_INCLUSIVE_GROUP"):
    exists = hasattr(dist.GroupMember, name)
    print(f"dist.GroupMember.{name:20}", "exists" if exists else "does NOT exist")

# %% [markdown]
# `WORLD` is the default group; `NON_GROUP_MEMBER` is what `new_group` returns
# on a rank that is not in the group (notebook 02). Before copying an API from a
# blog, look it up: `help(dist.new_group)`, or `hasattr` as above.
#
# **Where to go next:** [02 · Point-to-point, deadlock and groups](02_point_to_point.ipynb):
# the `send`/`recv` that collectives are made of, how to deadlock them (and not),
# and how to run collectives on part of the ranks.

# %%
# %ranks shutdown
