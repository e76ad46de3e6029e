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
# # 03 · Deriving ring AllReduce
#
# `dist.all_reduce` leaves the sum of every rank's tensor on every rank. In
# notebook 01 we counted that it must make each rank send at least about
# `2(p−1)/p · n` bytes for an `n`-byte tensor on `p` ranks. Here we build an
# all-reduce that does exactly that, from nothing but `send` and `recv`, by
# improving a naive version twice. Then you write it yourself.
#
# **You will leave this notebook able to**
# - cost the naive "everything to rank 0" all-reduce, and say why rank 0's link
#   is the bottleneck;
# - explain why the whole-buffer ring of older tutorials is correct but slow;
# - derive ring all-reduce (reduce-scatter, then all-gather) on paper, and prove
#   that each rank sends `2(p−1)/p · n` bytes;
# - implement it on point-to-point calls, for any `p` and any tensor length, and
#   verify it against `dist.all_reduce`;
# - recognise three common broken versions by what they do when run.
#
# The exercise is marked **Exercise 03.1**. Notation: **p** ranks, a tensor of
# **n** bytes; the sources cited are listed in
# [REFERENCES.md](../../REFERENCES.md#cost-models-and-algorithms).

# %%
import os

import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import costmodel
from labsupport.runtime import bench
from labsupport.runtime.check.ring import check_ring_allreduce, counting_sends
from labsupport.runtime.launch import rank_device
from labsupport.runtime.viz.schedule import animate_schedule, plot_schedule
from labsupport.schedules import execute, format_steps, naive_all_reduce, ring_all_reduce

# %load_ext labsupport

# %%
# %%ranks -n 4
print(f"rank {rank} of {world_size} ready on {device}")

# %% [markdown]
# We will try several all-reduce functions. Each takes this rank's tensor and
# returns the sum over all ranks. `trial` runs one of them on every rank and
# reports three things: whether the result equals `dist.all_reduce`'s (on
# integers, so "equal" means exactly equal), how many elements this rank sent
# (counted by `counting_sends`, which watches every `send`/`isend`), and how
# long one call takes. The timing uses the benchmark's own loop,
# `bench.time_case`: after a warm-up call it synchronizes the device,
# barriers, synchronizes again, starts the clock, runs the calls, synchronizes
# and stops the clock — the discipline of
# [notebook 06](06_measuring_bandwidth.ipynb), so the same cell would time an
# NPU or a GPU correctly.

# %%
cluster = lab.current_cluster()
P = cluster.world_size


def trial(allreduce, numel, iters=3):
    """On every rank: (result right?, elements sent / numel, seconds per call)."""
    rank, device = dist.get_rank(), rank_device()
    gen = torch.Generator().manual_seed(rank)
    x = torch.randint(-100, 100, (numel,), generator=gen).to(device)
    want = x.clone()
    dist.all_reduce(want)
    with counting_sends() as sent:
        got = allreduce(x.clone())
    right = torch.equal(got, want)
    y = torch.zeros(numel, device=device)  # zeros: repeated sums stay finite
    allreduce(y)  # warm-up
    seconds, _ = bench.time_case(lambda: allreduce(y), iters, device)
    return right, sent[0] / max(numel, 1), seconds


def report(name, allreduce, numel=2**16):
    """Run `trial` on every rank and print one line per rank."""
    print(f"{name}, {numel} elements on {P} ranks:")
    for rank, (right, sent, seconds) in enumerate(cluster.run(trial, allreduce, numel)):
        print(f"  rank {rank}: right={right}  sent {sent:.2f}·n  {seconds * 1e3:7.2f} ms")


# %% [markdown]
# ## 1. The naive version: everything to rank 0
#
# The obvious all-reduce: every rank sends its tensor to rank 0, rank 0 adds
# them up, then sends the sum back to everyone.

# %%
def naive_allreduce(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        incoming = torch.empty_like(tensor)
        for src in range(1, p):
            dist.recv(incoming, src)
            tensor += incoming
        for dst in range(1, p):
            dist.send(tensor, dst)
    else:
        dist.send(tensor, 0)
        dist.recv(tensor, 0)
    return tensor


# %% tags=["nbval-ignore-output"]
report("naive", naive_allreduce)

# %% [markdown]
# It is right, and the other ranks send only `n` elements each. But rank 0
# *receives* `p − 1` whole tensors and *sends* `p − 1` whole tensors: its link
# carries `2(p−1)·n` bytes, while the other links sit idle most of the time.
# The time grows linearly with `p`, and nothing overlaps: rank 0 handles one
# message after the other.
#
# The cost model of notebook 04 (α: latency per message, β: time per byte,
# γ: time per byte to add) counts this from the algorithm written as data: a
# list of steps, each a set of transfers "rank a sends chunk c to rank b, which
# adds it (`+=`) or copies it (`=`)". `labsupport.schedules` holds such
# schedules; `costmodel.cost` counts what each rank sends and
# receives in each step.

# %%
n = 4 * 2**20  # bytes: a 4 MiB tensor
naive = costmodel.cost(naive_all_reduce(P), n)
display(format_steps(naive_all_reduce(P)))
print("bytes sent per rank     / n:", naive.sent_per_rank / n)
print("bytes received per rank / n:", naive.received_per_rank / n)
print("rank 0's link carries", (naive.sent_per_rank[0] + naive.received_per_rank[0]) / n, "· n")

# %% [markdown]
# ## 2. The whole-buffer ring
#
# Older tutorials fix the bottleneck by arranging the ranks in a ring: each rank
# sends to its right neighbour `(rank + 1) % p` and receives from its left
# neighbour `(rank − 1) % p`. Every rank passes on what it just received and
# adds it to a running total; after `p − 1` steps every rank has seen every
# tensor once.

# %%
def whole_buffer_ring(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % p, (rank - 1) % p
    passing, total = tensor.clone(), tensor.clone()
    for _ in range(p - 1):
        incoming = torch.empty_like(tensor)
        ops = [dist.P2POp(dist.isend, passing, right), dist.P2POp(dist.irecv, incoming, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        total += incoming
        passing = incoming  # pass on what arrived, not what we summed
    tensor.copy_(total)  # in place, like dist.all_reduce
    return tensor


# %% tags=["nbval-ignore-output"]
report("whole-buffer ring", whole_buffer_ring)

# %% [markdown]
# Now every link works at every step, and nobody is a bottleneck. It is
# correct. But look at the traffic: each rank sends the **whole** tensor `p − 1`
# times, `(p − 1)·n` bytes, where notebook 01 said about `2n` would do. For
# `p = 8` that is 7n against 1.75n; for `p = 1024`, 1023n against 2n. The cost
# model counts it as `p − 1` steps of one whole buffer each,
# `(p−1)(α + nβ + nγ)`; against the ring we are about to derive:

# %%
for p in [2, 4, 8, 64, 1024]:
    # beta=1: the time is the bytes
    whole = costmodel.whole_buffer_ring_all_reduce_time(n, p, alpha=0, beta=1)
    chunked = costmodel.ring_all_reduce_time(n, p, alpha=0, beta=1)
    print(f"p={p:5}: whole-buffer ring moves {whole / n:7.2f}·n per rank, "
          f"chunked ring {chunked / n:.3f}·n  (ratio {whole / chunked:.1f} = p/2)")

# %% [markdown]
# ## 3. Split the tensor into p chunks
#
# The fix: cut the tensor into `p` chunks `c0 … c(p−1)` and send **one chunk**
# per step. It takes two phases.
#
# **Phase 1, reduce-scatter (p − 1 steps).** At step `s`, rank `r` sends chunk
# `(r − s − 1) mod p` to its right neighbour, which *adds* it into its own copy
# of that chunk. A chunk starts its trip at one rank, and every hop adds one
# more rank's contribution to it. Chunk `c` starts at rank `c + 1`; after
# `p − 1` hops it arrives at rank `c` holding all `p` contributions. So after
# phase 1, **rank r holds the complete sum of chunk r**, and only that.
#
# **Phase 2, all-gather (p − 1 steps).** At step `s`, rank `r` sends chunk
# `(r − s) mod p` (starting with its complete chunk `r`) to its right
# neighbour, which *copies* it over its own. Each complete chunk travels once
# around the ring.
#
# On paper, for `p = 4` (`x0+x3` means "the sum of rank 0's and rank 3's
# pieces of that chunk"; Σ is the complete sum):
#
# | step | rank 0 | rank 1 | rank 2 | rank 3 |
# |---|---|---|---|---|
# | RS 0 | sends c3; gets c2 → x0+x3 | sends c0; gets c3 → x0+x1 | sends c1; gets c0 → x1+x2 | sends c2; gets c1 → x2+x3 |
# | RS 1 | sends c2; gets c1 → x0+x2+x3 | sends c3; gets c2 → x0+x1+x3 | sends c0; gets c3 → x0+x1+x2 | sends c1; gets c0 → x1+x2+x3 |
# | RS 2 | sends c1; gets c0 → **Σ** | sends c2; gets c1 → **Σ** | sends c3; gets c2 → **Σ** | sends c0; gets c3 → **Σ** |
# | AG 0 | sends c0 (Σ); gets c3 = Σ | sends c1 (Σ); gets c0 = Σ | sends c2 (Σ); gets c1 = Σ | sends c3 (Σ); gets c2 = Σ |
# | AG 1 | sends c3; gets c2 = Σ | sends c0; gets c3 = Σ | sends c1; gets c0 = Σ | sends c2; gets c1 = Σ |
# | AG 2 | sends c2; gets c1 = Σ | sends c3; gets c2 = Σ | sends c0; gets c3 = Σ | sends c1; gets c0 = Σ |
#
# After RS 2, rank `r` holds the complete chunk `r` (the diagonal); after AG 2,
# every rank holds every chunk complete.
#
# The same algorithm, written as data, is `ring_all_reduce(p)`; read it in
# `labsupport/schedules/ring.py`, where the rule you just derived is a line of code
# (`chunk = (r - s - 1) % p`). Its table agrees with ours (rows are steps,
# `->1 c3 (+=)` means "sends chunk 3 to rank 1, which adds it"):

# %%
ring = ring_all_reduce(4)
format_steps(ring)

# %% [markdown]
# And here it is step by step. Each grid is one moment: a row per rank, a
# column per chunk; a cell says whose inputs the chunk contains (darker = more
# of the sum). Arrows are the transfers of the step about to run: red adds,
# green copies.

# %%
fig = plot_schedule(ring)

# %% [markdown]
# In JupyterLab you can also scrub through the steps with a slider, or press
# play to watch them one after the other (the picture above is the same
# thing, all at once, for readers without a kernel):

# %% tags=["nbval-ignore-output"]
animate_schedule(ring)

# %% [markdown]
# ### How many bytes does each rank send?
#
# **Claim.** In ring all-reduce each rank sends (and receives) exactly
# `2(p−1)/p · n` bytes, when `p` divides `n`.
#
# **Proof.** There are `2(p − 1)` steps (`p − 1` per phase). In every step,
# every rank sends exactly one chunk, of `n/p` bytes, to its right neighbour,
# and receives one from its left. So each rank sends `2(p − 1) · n/p` bytes. ∎
#
# When `p` does not divide `n`, chunks differ by at most one element, and a rank
# sends `2(p − 1)` chunks of at most `⌈n/p⌉` elements.
#
# **Why nothing can do much better.** Each of the `p` inputs has to reach
# `p − 1` other ranks, either raw or inside a partial sum, so at least
# `p − 1` chunk-sized pieces per chunk must arrive somewhere in the
# reduce phase, and again as many in the distribution phase: `2(p − 1)`
# transfers per element over `p` links. Spread evenly, that is `2(p−1)/p · n`
# per rank (nccl-tests' PERFORMANCE.md makes this argument; Patarasuk & Yuan,
# 2009, prove that no all-reduce built from point-to-point transfers does
# better, and that the ring reaches the bound). This is why the
# `busbw` of an all-reduce is `algbw × 2(p−1)/p`: it turns the measured time
# into the bandwidth each link actually ran at.
#
# Now count, two ways: with the cost model, for several `p`, and by running
# the schedule on our 4 ranks while `counting_sends` watches.

# %%
for p in [2, 3, 4, 8, 16]:
    per_rank = costmodel.cost(ring_all_reduce(p), n).sent_per_rank / n
    print(f"p={p:2}: each rank sends {per_rank.min():.4f}..{per_rank.max():.4f}·n,"
          f"  2(p−1)/p = {2 * (p - 1) / p:.4f}")


# %%
def engine_ring(tensor):
    return execute(ring_all_reduce(dist.get_world_size()), tensor)


# %% tags=["nbval-ignore-output"]
report("engine's ring", engine_ring)

# %% [markdown]
# `1.50·n` on every rank, as the proof says for `p = 4`: half of what the
# naive root sends, and half of the whole-buffer ring. (The times are printed
# but not compared yet: section 6 does that.)
#
# ## 4. Exercise 03.1: ring all-reduce on point-to-point
#
# Write `ring_allreduce(tensor)`: it sums `tensor` over all ranks **in place**
# (and returns it), using only `dist.isend`/`dist.irecv`/`dist.batch_isend_irecv`
# (or `send`/`recv`, carefully). It must work
# - for every world size `p ≥ 1`;
# - for every length, including lengths that `p` does not divide and lengths
#   smaller than `p` (some chunks are then empty);
# - on float and integer tensors.
#
# Hints:
# - `tensor.tensor_split(p)` returns `p` **views**: writing into a chunk writes
#   into `tensor`. (`tensor.chunk(p)` can return fewer than `p` chunks.)
# - In each step post the send and the receive together, e.g.
#   `dist.batch_isend_irecv([P2POp(isend, ...), P2POp(irecv, ...)])`, then wait
#   for both. Section 5 shows what happens if everyone receives first.
# - Receive into a fresh buffer in phase 1 (then add), directly into the chunk
#   in phase 2.
#
# The check runs your function on 3 and 4 ranks (starting a temporary group
# of 3 for a few seconds), on several lengths, against `dist.all_reduce`, and
# counts what each rank sends.

# %%
# Exercise 03.1: implement ring all-reduce on point-to-point
def ring_allreduce(tensor):
    # BEGIN SOLUTION
    rank, p = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % p, (rank - 1) % p
    chunks = tensor.view(-1).tensor_split(p)

    def exchange(send_chunk, recv_into):
        ops = [dist.P2POp(dist.isend, send_chunk, right), dist.P2POp(dist.irecv, recv_into, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    for s in range(p - 1):  # reduce-scatter: add the incoming chunk into ours
        incoming = torch.empty_like(chunks[(rank - s - 2) % p])
        exchange(chunks[(rank - s - 1) % p], incoming)
        chunks[(rank - s - 2) % p].add_(incoming)
    for s in range(p - 1):  # all-gather: copy the incoming chunk over ours
        exchange(chunks[(rank - s) % p], chunks[(rank - s - 1) % p])
    return tensor
    # END SOLUTION


# %%
check_ring_allreduce(ring_allreduce, cluster)

# %% [markdown]
# ### The engine's version
#
# `labsupport.schedules` does the same thing in a general way: `execute(schedule,
# tensor)` walks through the steps of any schedule, and in each step posts all
# of this rank's sends and receives at once with `batch_isend_irecv`, waits,
# then adds (`+=`) or copies (`=`) what arrived (`labsupport/schedules/execute.py`).
# Open `labsupport/schedules/ring.py`:
# `ring_reduce_scatter` and `ring_all_gather` are a few lines each, and
# `ring_all_reduce` is just one followed by the other. (The package builds the
# same steps in a compact form that stays fast for notebook 05's thousands of
# ranks, `labsupport/schedules/compact.py`; a test checks that the two send the
# same chunks, transfer by transfer.) Because the algorithm is
# data, the same object was costed (section 3), drawn (section 3) and run
# (above); [notebook 04](04_algorithms.ipynb) does the same with trees and
# recursive doubling.

# %%
print(ring_all_reduce(3).steps[0])  # step 0 as columns: src, dst, chunks, add or copy
for transfer in ring_all_reduce(3).steps[0]:  # ... or as transfers, one per line
    print(transfer)

# %% [markdown]
# ## 5. Common mistakes, run
#
# Each of these is in circulation in tutorials and blog posts. Each is run here
# and put through the same check as your exercise.
#
# ### 5a. Everyone receives before sending
#
# A blocking `recv` waits until the matching message arrives. If every rank
# starts its step with `recv`, nobody ever gets to `send`: a deadlock. The
# launcher notices that no rank finished within the timeout, shows where each
# one is stuck, and restarts the ranks.

# %%
def ring_receives_first(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = tensor.view(-1).tensor_split(p)
    for s in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - s - 2) % p])
        dist.recv(incoming, (rank - 1) % p)  # everyone waits here...
        dist.send(chunks[(rank - s - 1) % p], (rank + 1) % p)  # ...so nobody gets here
        chunks[(rank - s - 2) % p].add_(incoming)
    for s in range(p - 1):
        dist.recv(chunks[(rank - s - 1) % p], (rank - 1) % p)
        dist.send(chunks[(rank - s) % p], (rank + 1) % p)
    return tensor


# %%
check_ring_allreduce(ring_receives_first, cluster, world_sizes=[P], timeout=5)

# %% [markdown]
# (Odd and even ranks taking turns, or `isend` before `recv`, or
# `batch_isend_irecv` all fix it. For small messages some backends buffer a
# blocking `send`, so "send first, then receive" can *seem* to work, and then
# hang when the tensor grows: do not rely on it.)
#
# ### 5b. Forwarding the whole buffer
#
# The reduce-scatter idea, but with the whole tensor instead of a chunk: each
# rank sends its current partial sum around and adds what comes in. Contributions
# then get counted more than once.

# %%
def whole_buffer_added(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    for _ in range(p - 1):
        incoming = torch.empty_like(tensor)
        ops = [
            dist.P2POp(dist.isend, tensor.clone(), (rank + 1) % p),
            dist.P2POp(dist.irecv, incoming, (rank - 1) % p),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        tensor += incoming
    return tensor


def side_by_side(allreduce):
    """Rank r starts with [r, r, r, r]; what does each rank end with, next to dist.all_reduce?"""
    x = torch.full((4,), float(dist.get_rank()), device=rank_device())
    want = x.clone()
    dist.all_reduce(want)
    return f"got {allreduce(x).tolist()}, dist.all_reduce gives {want.tolist()}"


for rank, line in enumerate(cluster.run(side_by_side, whole_buffer_added)):
    print(f"rank {rank}: {line}")

# %%
check_ring_allreduce(whole_buffer_added, cluster, world_sizes=[P])

# %% [markdown]
# The old tutorial's version of section 2 avoids the double counting by passing
# on what it received rather than its sum: right result, but `(p − 1)·n` bytes
# per rank. The check catches that too, by counting:

# %%
check_ring_allreduce(whole_buffer_ring, cluster, world_sizes=[P])

# %% [markdown]
# ### 5c. An all-gather that adds
#
# Phase 2 must *copy* the complete chunks around. Adding instead (the same code
# as phase 1) adds complete sums onto stale partial sums:

# %%
def ring_gather_adds(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % p, (rank - 1) % p
    chunks = tensor.view(-1).tensor_split(p)
    for phase in range(2):
        for s in range(p - 1):
            send_c = (rank - s - 1 + phase) % p
            recv_c = (rank - s - 2 + phase) % p
            incoming = torch.empty_like(chunks[recv_c])
            ops = [dist.P2POp(dist.isend, chunks[send_c], right),
                   dist.P2POp(dist.irecv, incoming, left)]  # fmt: skip
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            chunks[recv_c].add_(incoming)  # right in phase 0, wrong in phase 1
    return tensor


for rank, line in enumerate(cluster.run(side_by_side, ring_gather_adds)):
    print(f"rank {rank}: {line}")

# %%
check_ring_allreduce(ring_gather_adds, cluster, world_sizes=[P])

# %% [markdown]
# ## 6. How close does a hand-written ring get?
#
# Finally, time. Each algorithm runs on float32 tensors of a few sizes, on
# this machine, next to the backend's own `dist.all_reduce`. The table shows the
# slowest rank's time per call, and `busbw = size / time × 2(p−1)/p` (notebook
# 06 explains why that factor, and how to measure more carefully). Your numbers
# will differ from anyone else's, and from run to run.
#
# **A caveat first.** The four algorithms only differ from `p = 3` on (with 2
# ranks the naive version, the ring and the whole-buffer ring all send one
# buffer each), so this experiment keeps our 4 ranks. Timings are only
# trustworthy with a core per rank; the next cell says whether this machine
# has them. With fewer cores, every number below also contains time spent
# waiting for a core, and only large differences mean anything.

# %% tags=["nbval-ignore-output"]
cores = os.cpu_count() or 1
print(f"{P} ranks on {cores} CPU cores: "
      + ("one core per rank." if cores >= P else
         f"oversubscribed ({P / cores:.0f} ranks per core); read the times as rough."))

# %%
BIG_SWEEP = False  # True: sizes up to 64 MiB (slow on a laptop)
sizes = [2**8, 2**14, 2**20] + ([2**22, 2**24] if BIG_SWEEP else [])  # elements
contenders = {
    "naive (root)": naive_allreduce,
    "whole-buffer ring": whole_buffer_ring,
    "engine ring": engine_ring,
    "dist.all_reduce": lambda t: dist.all_reduce(t) or t,
}
factor = 2 * (P - 1) / P

# %% tags=["nbval-ignore-output"]
rows = {}
print(f"{'size':>10}" + "".join(f"{name:>20}" for name in contenders) + "   (ms, busbw GB/s)")
for numel in sizes:
    line = f"{numel * 4 / 1024:8.0f}KiB"
    for name, fn in contenders.items():
        seconds = max(t for _, _, t in cluster.run(trial, fn, numel, iters=5))
        rows[numel, name] = seconds
        line += f"{seconds * 1e3:10.2f} {numel * 4 / seconds / 1e9 * factor:8.3f} "
    print(line)

big = sizes[-1]
ratio = rows[big, "dist.all_reduce"] / rows[big, "engine ring"]
print(f"\nat {big * 4 / 2**20:.0f} MiB the engine's ring reaches {ratio:.0%} "
      "of dist.all_reduce's busbw")
slowest = max(contenders, key=lambda name: rows[big, name])
print(f"slowest at {big * 4 / 2**20:.0f} MiB: {slowest}"
      + (" — as the byte count predicts" if slowest == "whole-buffer ring" else
         " — not the whole-buffer ring this time: on a shared machine, rerun before concluding"))

# %% [markdown]
# What to read in the table (your numbers will differ):
# - **Everything here shares one machine.** A "link" between two ranks is a
#   copy through the operating system, and every byte any rank sends costs the
#   same cores and the same memory. What counts is then the *total* number of
#   bytes moved, not how evenly they are spread over links. For `p = 4` the
#   naive version and the ring both move `2(p−1)·n = 6n` bytes in total; the
#   whole-buffer ring moves `p(p−1)·n = 12n`. Expect the whole-buffer ring to
#   be the slowest at the largest size, and do not be surprised if the naive
#   version keeps up with the ring: it has no idle links to waste here, and it
#   avoids the ring's `2(p − 1)` rounds of waiting for a neighbour.
# - **On a real cluster** every device has its own link and all links work at
#   the same time. Then the balance is what matters: the naive version is
#   limited by rank 0's single link carrying `2(p−1)·n` bytes, and the ring's
#   advantage grows with `p`. Notebook 05 emulates slow, separate links to see
#   this on a laptop.
# - **The engine's ring against `dist.all_reduce`**: gloo's own all-reduce is
#   also a ring-style algorithm for large tensors, in C++, overlapping the
#   additions with the transfers. The last line says how close a ring written
#   in Python, one blocking step at a time, gets to it.
# - **At the smallest size** bytes hardly matter: every step costs a fixed
#   latency (a Python call, a system call, waking up the receiving process),
#   and the ring needs `2(p − 1)` of them in a row.
#
# That is the α-β model in one table: `time ≈ steps · α + bytes · β`. The ring
# is optimal in bytes but not in steps. Other algorithms trade the two: a
# binomial-tree all-reduce (a reduce up a tree, then a broadcast down it)
# takes `2 log2 p` steps but sends the whole buffer in each; recursive
# doubling takes `log2 p` steps, also of whole buffers; Rabenseifner's
# algorithm takes `2 log2 p` steps with the ring's bytes. Which one wins
# depends on the message size, on `p`, and on the wiring between the ranks.
#
# To see how much the ring's `2(p − 1)` steps weigh at scale, take α and β
# from this machine: a fit of the `dist.all_reduce` column above to the ring
# model (rough: three sizes on a shared machine; notebook 06 fits properly),
# and ask the model about 1024 ranks:

# %% tags=["nbval-ignore-output"]
measured = [
    {"collective": "all_reduce", "size": numel * 4, "nranks": P, "in_place": True,
     "time_us": rows[numel, "dist.all_reduce"] * 1e6}
    for numel in sizes
]  # fmt: skip
fit = costmodel.fit_alpha_beta(measured)
print(f"this machine, {P} ranks:\n  {fit}")

# %% tags=["nbval-ignore-output"]
for size in [8 * 2**10, 2**20, 256 * 2**20]:
    t = costmodel.ring_all_reduce_time(size, 1024, fit.alpha, fit.beta)
    latency = 2 * 1023 * fit.alpha
    print(f"{size / 2**20:8.3f} MiB on 1024 ranks: ring all-reduce {t * 1e3:9.2f} ms, "
          f"of which latency {latency / t:.0%}")

# %% [markdown]
# Whatever α and β your machine gives, the latency share can only fall as
# the message grows: the `2(p − 1)·α` term does not depend on the size, and at
# 1024 ranks it is 2046 messages in a row. That is why large clusters use
# trees or hierarchical rings for small messages, which
# [notebook 04](04_algorithms.ipynb) compares.

# %% [markdown]
# ## Read the code
#
# What this notebook taught is in these files of the course's teaching core
# (`labsupport/README.md` maps them all); each holds one idea:
#
# - `labsupport/schedules/ring.py`: the ring as you derived it: `ring_reduce_scatter` holds the line `chunk = (r - s - 1) % p`, `ring_all_gather` the line `chunk = (r - s) % p`.
# - `labsupport/schedules/model.py`: what a schedule is: `Schedule`, and `Step`, a table of (src, dst, chunk, add or copy).
# - `labsupport/schedules/execute.py` (`execute`): any schedule run with `batch_isend_irecv`.
# - `labsupport/schedules/replay.py` (`verify` and `format_steps`): what a schedule computes, checked on paper.
# - `labsupport/schedules/builders.py`: `naive_all_reduce`, and the direct (mesh) and binomial-tree algorithms.

# %% [markdown]
# ## Recap
# - Naive reduce-to-root + broadcast is right, but rank 0's link carries
#   `2(p−1)·n` bytes and handles `2(p−1)` messages one after the other.
# - The whole-buffer ring spreads the load over every link but sends
#   `(p−1)·n` bytes per rank: `p/2` times too much.
# - Ring all-reduce = reduce-scatter (`p−1` steps, add) + all-gather (`p−1`
#   steps, copy), one chunk of `n/p` per step: `2(p−1)/p·n` bytes per rank,
#   which is the lower bound behind busbw's factor.
# - Working code posts each step's send and receive together, cuts the tensor
#   with `tensor_split` (any length, empty chunks allowed), adds in phase 1 and
#   copies in phase 2.
# - `labsupport.schedules` writes such algorithms once, as data, and runs,
#   costs and draws them.
#
# > **Common mistake: a "ring all-reduce" that is not one.** A popular
# > article on HCCL shows a ring all-reduce in which every rank starts each
# > step with a blocking receive (so it deadlocks, section 5a), sends the
# > whole buffer instead of one chunk (so it moves `p/2` times too many bytes,
# > or double-counts, section 5b), talks to ranks `rank ± i` instead of its
# > two ring neighbours, and adds in the all-gather phase where it must copy
# > (section 5c). A ring all-reduce sends exactly one chunk of `n/p` to the
# > right neighbour and receives one from the left in each of its `2(p − 1)`
# > steps, posting both together; it adds in the first `p − 1` steps and
# > copies in the last `p − 1`. `check_ring_allreduce` catches each of those
# > mistakes by what it does when run.
#
# **Where to go next:** [notebook 04](04_algorithms.ipynb), algorithms and
# cost models, puts numbers on α, β and γ for your machine, and compares the
# ring with binomial trees, recursive doubling and Rabenseifner's algorithm,
# to find where each one wins. [Notebook 05](05_topology.ipynb) adds topology, and
# [notebook 06](06_measuring_bandwidth.ipynb) measures bandwidth properly.
