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
# # 09 · Troubleshooting: hangs, timeouts, mismatches, rendezvous
#
# A distributed job rarely fails with a clear error on the line that is wrong. It
# hangs, or one rank times out minutes later in a call that is fine, or it finishes
# with numbers that are quietly wrong. This notebook is a lab of broken programs,
# each run for real on the course's ranks (and, for start-up failures, under real
# `torchrun` launchers on this machine). Each one comes as **symptom → diagnosis →
# fix**.
#
# **You will leave this notebook able to**
# - read a hang from the per-rank stacks: a rank that skips a collective, a send
#   nobody receives, a subgroup built by only some ranks; and find the missing rank
#   with `monitored_barrier`;
# - say where a timeout comes from and where it is set: `init_process_group(timeout=…)`
#   and `new_group(timeout=…)`, NCCL's watchdog and its `TORCH_NCCL_*` variables,
#   `HCCL_CONNECT_TIMEOUT` and `HCCL_EXEC_TIMEOUT`;
# - catch mismatched collectives (shape, dtype, order) with
#   `TORCH_DISTRIBUTED_DEBUG=DETAIL`, and know the one it does not catch (the op);
# - read a failed `torchrun` rendezvous (a port already in use, a wrong
#   `MASTER_ADDR`, a node that never starts; the static and the c10d rendezvous),
#   and a worker's crash from torchrun's "Root Cause" summary;
# - map ranks to devices with `LOCAL_RANK`, not `RANK`, under torchrun and under
#   Slurm, and run the course's scripts on a Slurm cluster;
# - recognise the calls and variables that circulate but do not exist, and know the
#   environment variables that do matter on HCCL and NCCL (logs, timeouts,
#   containers).
#
# Every cell that fails does so on purpose, with a short timeout: a hang costs a
# few seconds and a restart of the ranks, never a stuck notebook. The exercises are
# **Exercise 09.1–09.3**: three broken programs to fix. Sources are in
# [REFERENCES.md](../../REFERENCES.md#troubleshooting).

# %%
import inspect
import subprocess
import sys
import textwrap
import time
import warnings

import torch
import torch.distributed as dist

from labsupport.runtime import diagnose
from labsupport.runtime.check import troubleshooting as checks
from labsupport.runtime.torchrun import failure_cases, port_in_use, run_torchrun
from labsupport.runtime.viz.waitfor import draw_wait_for

# %load_ext labsupport

# %% tags=["nbval-ignore-output"]
# %%ranks -n 4
print(f"rank {rank} of {world_size} on {device}")

# %% [markdown]
# ## 1. Hangs
#
# A hang is the commonest failure, and the least talkative: nothing is printed,
# nothing raises, until some timeout fires (by default 10 minutes on NCCL, 30 on the
# other backends). The first question is always the same: **where is each rank
# waiting?** The launcher answers it when a cell runs past its `--timeout`: it
# raises `CollectiveTimeout` with each blocked rank's Python stack (read with
# `faulthandler`, which works even while a rank is stuck inside C++), then restarts
# the ranks. On a real cluster, `py-spy dump --pid <pid>` on each process gives the
# same view.
#
# ### 1a. A rank skips a collective
#
# **Symptom.** A loop that has run a thousand times hangs. Here, rank 3 "has
# nothing to add" this time and skips an `all_reduce`; then every rank goes on to a
# `barrier`. **This cell fails on purpose.**

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
x = torch.ones(3, device=device)
if rank != 3:  # rank 3 has nothing to add this time...
    dist.all_reduce(x)
dist.barrier()  # ...and everyone meets here

# %% [markdown]
# **Diagnosis.** Read the stacks one line per rank: three ranks wait in the
# `all_reduce` line, one is already at the next line, in `barrier`. *The rank that
# is somewhere else is the one that took another path.* Ranks that finished the
# cell have no stack at all; they are listed as such.

# %%
diagnose.print_where_blocked(sys.last_value, world_size=4)

# %% [markdown]
# Note what did *not* happen: rank 3's `barrier` did not pair with the others'
# `all_reduce` and return. Collectives are matched by their order on the group, not
# by their name: rank 3's first collective is a barrier, the others' first is an
# all-reduce. The two algorithms exchange different messages, so here each side
# waits for a message the other never sends. Depending on the backend and the
# sizes, such a pair can also crash (section 3 shows one), or complete with data
# that means nothing.
#
# **Fix.** Every rank calls every collective on a group, the same number of times,
# in the same order. A rank with nothing to add contributes a neutral value (0 for a
# sum, and a count of 0), instead of skipping the call. Exercise 09.1 is this bug.
#
# ### Finding the missing rank: `monitored_barrier`
#
# With many ranks, "who is missing?" is hard to read from stacks. On gloo,
# `dist.monitored_barrier(timeout=…, wait_all_ranks=True)` answers it: rank 0 waits
# for every other rank and *names* the ones that did not arrive. It is a debugging
# tool (rank 0 talks to every rank one by one), and when it fails it leaves its
# group unusable, so call it on a gloo side group made for the purpose, not on the
# group your training uses. Here rank 2 is stuck elsewhere. The barrier raises on
# the ranks that reached it; each catches its error and prints its first line.
# torch's C++ log adds its own lines (`[E time file:line]`), on stderr.

# %% tags=["nbval-ignore-output"]
# %%ranks --timeout 15
import datetime
import textwrap

probe = dist.new_group(backend="gloo")  # a side group: the check may break it, not the main one
if rank != 2:  # rank 2 is stuck somewhere else
    try:
        two_s = datetime.timedelta(seconds=2)
        dist.monitored_barrier(group=probe, timeout=two_s, wait_all_ranks=True)
    except RuntimeError as err:
        print("RuntimeError:", textwrap.shorten(str(err).splitlines()[0], 100))

# %% [markdown]
# The other ranks' errors only say "check rank 0 logs"; rank 0's says who is
# missing. The main group is untouched (no restart was needed):

# %%
# %%ranks
x = torch.ones(1, device=device)
dist.all_reduce(x)
print("all_reduce on the main group:", x.item())

# %% [markdown]
# ### 1b. A send that nobody receives
#
# **Symptom.** Rank 0 sends a header (the length) and then the data; rank 1
# receives the header and moves on. On gloo a blocking `send` returns only when the
# receiver has taken the data (notebook 02), so rank 0 waits forever. (Code that
# works only because a backend buffers small messages breaks when they grow.)
# **This cell fails on purpose.**

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
if rank == 0:
    dist.send(torch.tensor([3.0]), dst=1)  # the length...
    dist.send(torch.arange(3.0), dst=1)  # ...then the data
elif rank == 1:
    length = torch.empty(1)
    dist.recv(length, src=0)
    print("rank 1 got the length", length.item(), "and forgot to receive the data")

# %% [markdown]
# **Diagnosis.** Only rank 0 is blocked, in `send`, to rank 1; rank 1 finished. In
# the wait-for picture (notebook 02), an arrow points to a rank that is not waiting
# for anyone: no cycle, so this is not a deadlock between ranks but a message with
# no receiver.

# %%
diagnose.print_where_blocked(sys.last_value, world_size=4)
fig = draw_wait_for(sys.last_value.stacks, world_size=4)

# %% [markdown]
# **Fix.** Every `send` needs a `recv` with the same peer, size and dtype (and tag,
# if you use tags) on the other side. Write the sender and the receiver of a message
# next to each other in the code, as in notebook 02, so a reader can pair them.
# Exercise 09.3 is this bug, in a pipeline.
#
# ### 1c. A subgroup built by only some ranks
#
# **Symptom.** Two "nodes" of two ranks; each rank creates only its own node's
# group, the mistake of a widely copied article (notebook 02 shows it on 8 ranks).
# Without `use_local_synchronization=True`, `new_group` is a collective over *all*
# ranks, numbered by a counter: both nodes create the same group number, each with
# different members, so their rendezvous keys collide. What follows is a race:
# which ranks hang, and which get through (possibly in a group with ranks of the
# other node), changes from run to run. **This cell fails on purpose** (usually).

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
node = rank // 2
my_node = dist.new_group([2 * node, 2 * node + 1])  # WRONG: called by the node's own ranks only
x = torch.tensor([float(rank)], device=device)
dist.all_reduce(x, group=my_node)
print(f"node {node}: sum over my node {x.item():.0f} (want {4 * node + 1})")

# %% [markdown]
# **Diagnosis.** The stacks show ranks waiting in `new_group` or in an
# `all_reduce` *on a subgroup*, while others finished: a hint that the groups differ
# between ranks. Printing `dist.get_process_group_ranks(group)` on every rank makes
# it plain.
#
# **Fix.** Every rank calls `new_group` for every group, in the same order;
# `new_subgroups_by_enumeration` does exactly that for a list of groups and returns
# the one this rank is in:

# %%
# %%ranks
my_node, _ = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])  # every rank, every group
x = torch.tensor([float(rank)], device=device)
dist.all_reduce(x, group=my_node)
print(f"group {dist.get_process_group_ranks(my_node)}: sum over my node {x.item():.0f}")

# %% [markdown]
# ## 2. Timeouts: what each backend says, and where it is set
#
# A timeout is a hang that someone decided to stop. There are two different clocks:
#
# - the **launcher's** `--timeout` in this course (a notebook convenience: it shows
#   the stacks and restarts the ranks);
# - the **process group's own timeout**, set by `init_process_group(timeout=…)` for
#   the default group and by `new_group(timeout=…)` for a subgroup. Its default is
#   10 minutes for NCCL and 30 minutes for the other backends
#   ([torch.distributed](../../REFERENCES.md#troubleshooting)). When it fires,
#   the collective raises on the ranks that are waiting.
#
# Here is gloo's own message, from a subgroup created with a 2-second timeout; rank 3
# skips its `all_reduce`. **This cell fails on purpose.**

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 15
import datetime

quick = dist.new_group(timeout=datetime.timedelta(seconds=2))  # this group gives up after 2 s
x = torch.ones(3, device=device)
if rank != 3:
    dist.all_reduce(x, group=quick)

# %% [markdown]
# `Timed out waiting 2000ms for recv operation to complete` (or `send`): gloo says
# which transfer gave up, not which rank is missing; the stacks or
# `monitored_barrier` tell you that. The subgroup `quick` is broken after this
# (throw it away), but the main group still works:

# %%
# %%ranks
x = torch.ones(1, device=device)
dist.all_reduce(x)
print("all_reduce on the main group:", x.item())

# %% [markdown]
# **NCCL** (in outline). A collective on NCCL returns at once: the GPU runs it
# later. A **watchdog** thread in each process checks the running collectives; when
# one exceeds the group's timeout it logs, for example, `Watchdog caught collective
# operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1,
# Timeout(ms)=600000) ran for 600013 milliseconds before timing out` (quoted from a
# user report, NVIDIA/Megatron-LM issue 1207), and by default tears the process
# down. Compare `SeqNum` and `OpType` across the ranks' logs: ranks stuck at
# different sequence numbers, or the same number with different op types (one
# report, NVIDIA/nccl issue 1409, shows `BROADCAST` on one rank and `ALLREDUCE` on
# others at one `SeqNum`), point at the rank that went another way. PyTorch's
# variables for this ([PyTorch, ProcessGroupNCCL environment
# variables](../../REFERENCES.md#troubleshooting)):
#
# | variable | what it does |
# |---|---|
# | `TORCH_NCCL_ASYNC_ERROR_HANDLING` | what the watchdog does on an error or timeout: 0 nothing, 1 abort the communicator and tear down the process, 2 abort only, 3 tear down only (the default) |
# | `TORCH_NCCL_BLOCKING_WAIT` | make `wait()` block and raise the timeout in your code instead |
# | `TORCH_NCCL_DUMP_ON_TIMEOUT` + `TORCH_NCCL_TRACE_BUFFER_SIZE` | dump the last collectives of each rank (the "flight recorder") on a timeout |
# | `TORCH_NCCL_DESYNC_DEBUG` | try to name the rank that fell out of step |
# | `TORCH_NCCL_ENABLE_MONITORING`, `TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC` | a second thread that kills the process if the watchdog itself is stuck |
#
# **HCCL** (Ascend; not run here). Two timeouts of its own, both environment
# variables ([CANN environment variable reference](../../REFERENCES.md#troubleshooting)):
# `HCCL_CONNECT_TIMEOUT`, how long ranks wait for each other while *setting up
# links* (seconds, 120–7200, default 120; the real wait is 20 s longer), and
# `HCCL_EXEC_TIMEOUT`, how long a rank waits for its peers *during* a collective.
# Its range depends on the hardware and on where the algorithm is expanded
# (`HCCL_OP_EXPANSION_MODE`):
#
# | hardware, mode | range, s | default, s | 0 means |
# |---|---|---|---|
# | Atlas A2 and A3, host or AI CPU expansion | 0 to 2147483647 | 1836 | never time out |
# | Atlas A2 and A3, `HCCL_OP_EXPANSION_MODE=AIV` | 0 to 1091 | 1091 | 1091 (so does any value above it) |
# | Atlas training series (910) | (0, 17340], rounded down to a multiple of 68 (a value below 68 counts as 68) | 1836 | not allowed |
#
# torch_npu's
# `HCCL_ASYNC_ERROR_HANDLING` turns on asynchronous error handling (on by default
# since torch 2.1; its documentation says it ends the process on an `ERROR CQE`
# error and only prints the others); the same documentation advises an
# `init_process_group` timeout *longer* than both HCCL timeouts, so that HCCL's more precise error comes first. What HCCL
# says, from users' reports: `EI0006: Getting socket times out. Reason: Remote Rank
# did not send the data in time` at link setup (vllm-project/vllm-ascend issue 486),
# and `EI0002: The wait execution of the Notify register times out`, naming the
# remote rank and the group, during execution, with "default 1800s, You can set the
# interval by using HCCL_EXEC_TIMEOUT" among its possible causes (issue 3413). That
# "1800s" is the message's wording, not the variable's default: older CANN
# releases documented 1800 s for the 910's training series, and since 1800 is not a
# multiple of 68 the timeout in force there was 1768 s; today's reference gives 1836
# (= 27 × 68) outside AIV mode. When HCCL's own numbers matter, read the reference
# for your CANN version.
#
# ## 3. Mismatched collectives, caught with `TORCH_DISTRIBUTED_DEBUG=DETAIL`
#
# With `TORCH_DISTRIBUTED_DEBUG=DETAIL`, PyTorch wraps every process group in a
# checker: before each collective, the ranks compare a fingerprint of the call (op
# type, sequence number, tensor shapes, dtypes, devices) and raise on every rank if
# they differ (notebook 02, section 3). It costs an extra exchange per call: a
# debugging setting. The variable is read when the group is created, so the ranks
# start again with it (`%%ranks --env ...`; under torchrun, in the shell).
#
# The skipped collective of section 1a, now: no hang, an error at once. **This cell
# fails on purpose.**

# %% tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL --timeout 20
x = torch.ones(3, device=device)
if rank != 3:
    dist.all_reduce(x)
dist.barrier()

# %% [markdown]
# The key fact is at the end of each message ("differ in the following aspects"),
# in words torch runs together (`Op type: ALLREDUCEvs REDUCE`);
# `diagnose.mismatch_aspects` reads it back as one line per rank:

# %% tags=["nbval-ignore-output"]
for r, aspects in diagnose.mismatch_aspects(sys.last_value).items():
    print(f"rank {r}: {aspects}")

# %% [markdown]
# Every rank raised at once, at `SequenceNumber=0`, and one rank reports something
# different from the others: rank 3 says it runs a `BARRIER`, the others an
# `ALLREDUCE`. The op named for the *other* side is less reliable: in runs of this
# cell it has named ops that no rank's code called (the lines above show this
# run's), and the fingerprint shown for the other side may carry no tensor at all
# (shapes `(none)`). What to read: *which rank is the odd one out*, and *at which
# sequence number*.
#
# Now the four ways a collective can mismatch: shape, dtype, order, and op,
# written once in `labsupport.runtime.diagnose` (the deck of this notebook runs the same
# function). Each case is caught on the ranks (`try`/`except`), so one cell shows
# all four:

# %%
print(inspect.getsource(diagnose.four_mismatches))

# %% [markdown]
# **Predict first:** which of the four does DETAIL catch? Rank 0 prints what
# happened in each case.

# %% tags=["nbval-ignore-output"]
# %%ranks --show 0
from labsupport.runtime.diagnose import four_mismatches

for case, result in four_mismatches(rank, device).items():
    print(f"{case:6} {result}")

# %% [markdown]
# <details><summary>Answer</summary>
#
# Shape, dtype and order (reported as the op *type*) raise on every rank. A
# different **reduce op** is not part of the fingerprint: the call goes through, and
# the result is neither the sum nor the maximum, silently, on every rank. Only a
# test against a known answer (as the graders of this course do) catches that one.
# </details>
#
# After each caught mismatch the group goes on working, as the next case shows: the
# checker raised before any data moved. Without DETAIL the same shape mismatch can
# crash a rank: on gloo, an `all_gather` of tensors of different lengths kills the
# receiving rank with `Received data size doesn't match expected size. Is there a
# distributed collective mismatch in your code?` (that is the grader's message when
# Exercise 09.2 is still broken).
#
# ## 4. Rendezvous failures under `torchrun`, and a worker that crashes
#
# Before any collective, the ranks must find each other: `torchrun` (that is,
# `python -m torch.distributed.run`) on each node runs a *rendezvous*, then starts
# `--nproc-per-node` workers with `RANK`, `LOCAL_RANK`, `WORLD_SIZE`,
# `MASTER_ADDR` and `MASTER_PORT` set ([torchrun](../../REFERENCES.md#troubleshooting)).
# It has two rendezvous, which fail with different messages:
#
# - the **static** one (the default, with `--master-addr` and `--master-port`): a
#   TCP store served by node 0; its timeout is `--rdzv-conf=timeout=…`, default
#   900 s;
# - the **c10d** one of torchrun's multi-node recipe (`--rdzv-backend=c10d
#   --rdzv-endpoint=host:port`, what `examples/slurm/launch.sh` uses): its wait for
#   the nodes is `--rdzv-conf=join_timeout=…`, default 600 s.
#
# Five cases (`labsupport.runtime.torchrun.failure_cases`, printed below), started for real
# on this machine, all at the same time, each with a rendezvous timeout of 3 s.
# `labsupport.runtime.torchrun` runs each launcher in a session of its own and kills it,
# with anything it started, when it ends or at the deadline:
#
# - **a port already in use**: another process (here, a socket this notebook holds)
#   already listens on `MASTER_PORT`;
# - **a wrong `MASTER_ADDR`**: node 1 is told to find node 0 at `127.0.0.2`, where
#   nothing listens (a typo, or the wrong network interface's address);
# - **a node that never starts**, static and c10d: node 0 of a 2-node job waits for
#   node 1, which was never launched (or crashed, or has a different `--nnodes`);
# - **a worker that crashes**: the rendezvous succeeds, and one of the two workers
#   raises in its own code.
#
# Each launcher is a new Python process that imports torch before it does anything
# else, and the crashing case starts two more, all at once on a laptop's few
# cores: that start-up comes before any timeout can begin. The first cell below
# measures one such import alone; compare it with each case's seconds.

# %% tags=["nbval-ignore-output"]
start = time.perf_counter()
subprocess.run([sys.executable, "-c", "import torch.distributed.run"], check=True)
IMPORT_S = time.perf_counter() - start
print(f"python -c 'import torch.distributed.run', alone: {IMPORT_S:.1f} s")

# %%
print(inspect.getsource(failure_cases))  # the five launches (the deck runs the same)

# %% tags=["nbval-ignore-output"]
with port_in_use() as busy:
    cases = failure_cases(busy, timeout=3)
    runs = run_torchrun(list(cases.values()), timeout=120)
for case, run in zip(cases, runs, strict=True):
    print(f"{case}: exit code {run.returncode} after {run.seconds:.1f} s")
    print(textwrap.fill(run.error_line(), 118, initial_indent="  ", subsequent_indent="    "))

# %% [markdown]
# How to read them:
#
# - `EADDRINUSE` ("The server socket has failed to listen"): node 0 could not open
#   the store. Pick another `--master-port`, or find what holds it (`ss -ltnp`), often
#   a previous run that has not exited.
# - `The client socket has timed out ... while trying to connect to (127.0.0.2, port)`:
#   a *client* could not reach the store. Check `MASTER_ADDR` from that node
#   (`ping`, `nc -zv addr port`), firewalls, and that node 0 is up. Note that the
#   store listens on every interface of node 0 while it runs, not only on
#   `MASTER_ADDR`.
# - `Timed out after N seconds waiting for clients. 1/2 clients joined`: the static
#   store was up, but not every node came. Count the launchers that started,
#   compare `--nnodes` on every node, look for a node that crashed before joining.
# - `RendezvousTimeoutError`, with no message at all: the same missing node under
#   the c10d rendezvous, after `join_timeout`. Nothing says how many nodes came;
#   count the launchers yourself, as above.
# - A worker's own error: torchrun ends with `ChildFailedError`, and the line above
#   is the worker's exception (when the worker's output reaches you). Its summary
#   names the worker that failed first:

# %% tags=["nbval-ignore-output"]
print(runs[-1].root_cause())

# %% [markdown]
# Read `rank` (the global rank, and its local rank on that node), `exitcode` (a
# negative one is a signal: -9 killed, often by the out-of-memory killer; -6 an
# abort) and `host`, then that rank's own output. Other failures are listed above
# the root cause. `traceback: To enable traceback...` means the worker's traceback
# was not recorded in torchrun's error file: decorate your `main` with
# `torch.distributed.elastic.multiprocessing.errors.record` to have it there, or
# read the worker's stderr.
#
# Where the time went: each launcher's start-up (Python and `import torch`,
# measured alone above; more when several start at once on few cores), then the
# 3 s timeout where there is one, then torchrun's shut-down; the crashing case
# also starts two workers, each importing torch again. On a cluster each node
# starts only its own launcher, so a failed rendezvous costs the start-up plus
# the timeout.
#
# ## 5. Which device is mine? `LOCAL_RANK`, not `RANK`
#
# On a job of 2 servers with 8 devices each, torchrun numbers the workers `RANK =
# node_rank × nproc_per_node + LOCAL_RANK`: `RANK` runs 0–15 across the job,
# `LOCAL_RANK` 0–7 on each server. A device index is local to a server, so each
# worker must take device `LOCAL_RANK`:

# %%
NODES, PER_NODE = 2, 8
print("node  RANK  LOCAL_RANK  set_device(RANK)           set_device(LOCAL_RANK)")
for node in range(NODES):
    for local in (0, 1, PER_NODE - 1):
        r = node * PER_NODE + local
        by_rank = f"device {r}" + ("" if r < PER_NODE else " (no such device)")
        print(f"{node:4}  {r:4}  {local:10}  {by_rank:25}  device {local}")

# %% [markdown]
# The two classic mistakes and what they look like:
#
# - `torch.cuda.set_device(rank)` (or `torch.npu.set_device(rank)`): fine on one
#   server, then on server 2 the index runs past the devices that exist and the
#   program stops at start-up with an invalid-device error.
# - no `set_device` at all: every process uses device 0. NCCL then refuses, in
#   users' reports as `ncclInvalidUsage ... Duplicate GPU detected : rank 3 and rank 0
#   both on CUDA device f000` (NVIDIA/Megatron-LM issue 661); or the job runs with
#   8 processes sharing one device, slowly.
#
# The right start of a script, for each backend (the course's launcher and
# `examples/hello_ranks.py` do exactly this):
#
# ```python
# local_rank = int(os.environ["LOCAL_RANK"])
# torch.npu.set_device(local_rank)     # HCCL (torch_npu);  NCCL: torch.cuda.set_device(local_rank)
# dist.init_process_group("hccl")      # or "nccl"; then tensors on torch.device("npu", local_rank)
# ```
#
# The `%%ranks` workers are one "node", so `local_rank` equals `rank` here:

# %%
# %%ranks
import os

print(f"RANK {os.environ['RANK']}, LOCAL_RANK {os.environ['LOCAL_RANK']}, device {device}")

# %% [markdown]
# ### Under Slurm
#
# On a Slurm cluster, `srun` can start one task per device itself, without
# torchrun. Each task then learns who it is from Slurm's own variables:
# `SLURM_PROCID` (the rank), `SLURM_LOCALID` (the local rank), the number of tasks,
# and the list of nodes; Slurm says nothing about where the ranks should meet. The
# course's scripts (`examples/hello_ranks.py`, `ddp_overlap.py`, `capstone.py`,
# `labsupport.runtime.bench`) read either launcher's variables with
# `labsupport.runtime.cluster_env`, which takes `MASTER_ADDR` from the first node of the
# step and `MASTER_PORT` from the job id. Here it is on the environment the second
# node of a 2-node, 8-task-per-node job would see (a dictionary, not this machine's):

# %%
from labsupport.runtime import cluster_env

slurm_task = {  # what srun sets for task 9 of 16: the second task on node02
    "SLURM_JOB_ID": "48213", "SLURM_PROCID": "9", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
    "SLURM_STEP_NUM_TASKS": "16", "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
    "SLURM_STEP_NODELIST": "node[01-02]",
}  # fmt: skip
found = cluster_env.from_environment(slurm_task, use_scontrol=False)
for name, value in found.torchrun_vars().items():
    print(f"{name:>16} = {value:<8} from {found.sources[name]}")

# %% [markdown]
# The device mistake has a Slurm form too. The course's sbatch scripts ask for the
# devices *per node*, so every task sees all 8 of its node's devices, and must take
# device `LOCAL_RANK` (= `SLURM_LOCALID`): a task that takes device 0 ("the first
# one I see") puts all 8 tasks of a node on one device. Asking for one device *per
# task* instead (`--gpus-per-task=1`) makes Slurm show each task only its own GPU,
# numbered 0, and then device `LOCAL_RANK` does not exist on local ranks 1–7. Pick
# one of the two and say it in the script; `examples/hello_ranks.py` prints, per
# rank, the device it took and the devices it sees, so one run shows which case
# you are in.
#
# The ready scripts are in `examples/slurm/`: `hello_ranks.sbatch`, `bench.sbatch`
# (notebook 06's benchmark) and `ddp.sbatch`, 1 or 2 nodes
# (`sbatch --nodes=2 examples/slurm/hello_ranks.sbatch`). Both ways of launching are
# in `launch.sh` beside them: `srun` starting one task per device (the default), or
# `srun` starting one `torchrun` per node with the c10d rendezvous on the first node
# (`LAUNCH=torchrun`). `launch.sh` also carries, commented, the variables of
# section 7 (device visibility, timeouts, interfaces, logs): uncomment what your
# cluster needs. Start with `hello_ranks.sbatch`: if it does not print every rank
# and the right sum, nothing else will work.

# %% [markdown]
# ## 6. Calls that do not exist
#
# Some names circulate in blog posts and generated code but are not part of any
# release. If you meet them, here is what to use instead:
#
# | you may see | what is true | use instead |
# |---|---|---|
# | `torch.npu.set_config(topology_aware=True)` | no such function in torch_npu | nothing to switch on: HCCL picks its algorithm from the topology; `HCCL_ALGO` to force one (notebook 05) |
# | `torch_npu.npu.topology` | no such module | `npu-smi info -t topo` on the server (notebook 05) |
# | `dist.GroupMember.NON_INCLUSIVE_GROUP` | `GroupMember` has only `WORLD` and `NON_GROUP_MEMBER` | compare with `dist.GroupMember.NON_GROUP_MEMBER`, which `new_group` returns to non-members |
# | `torch.distributed.dist_c10d` | no such module | `torch.distributed` itself (its implementation is `torch.distributed.distributed_c10d`) |
# | `NCCL_TOPOLOGY_FILE` | not an NCCL variable, and meaningless to HCCL | `NCCL_TOPO_FILE` (an XML topology for NCCL) |
# | `NCCL_SOCKET_NIC_TOPOLOGY` | not an NCCL variable | `NCCL_SOCKET_IFNAME` (which interfaces); on HCCL, `HCCL_SOCKET_IFNAME` |
# | `NCCL_DEBUG=INFO`, `NCCL_DEBUG_SUBSYS=ALL` set for an HCCL job | real NCCL variables, but HCCL does not read them: the job logs nothing more | `ASCEND_GLOBAL_LOG_LEVEL` and `ASCEND_SLOG_PRINT_TO_STDOUT` (section 7) |
# | `python -m torch.distributed.launch` | it still exists (the cell below finds it), deprecated in favour of `torchrun` | `torchrun` (reads `LOCAL_RANK` from the environment, not from a `--local-rank` argument) |
#
# `HCCL_WHITELIST_DISABLE`, by contrast, is real (section 7). The PyTorch names can
# be checked on this installation; the torch_npu ones need an Ascend machine:

# %%
import importlib

for name in ("WORLD", "NON_GROUP_MEMBER", "NON_INCLUSIVE_GROUP"):
    exists = hasattr(dist.GroupMember, name)
    print(f"dist.GroupMember.{name}: {'exists' if exists else 'no such name'}")
for module in ("torch.distributed.dist_c10d", "torch.distributed.distributed_c10d",
               "torch.distributed.launch", "torch.distributed.run"):  # fmt: skip
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(module)
        print(f"{module}: exists")
    except ModuleNotFoundError:
        print(f"{module}: no such module")

# %% [markdown]
# ## 7. The environment variables that matter
#
# Set them in the shell before `torchrun` (or with `%%ranks --env KEY=VALUE` here).
# Each is from its backend's own documentation (sources in
# [REFERENCES.md](../../REFERENCES.md#troubleshooting)).
#
# | backend | variable | what it is for |
# |---|---|---|
# | all | `TORCH_DISTRIBUTED_DEBUG=DETAIL` | fingerprint check of every collective (section 3); `INFO` for less |
# | all | `MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`, `LOCAL_RANK` | set by torchrun; the rendezvous (section 4) and the device (section 5) |
# | gloo | `GLOO_SOCKET_IFNAME` | the network interface gloo uses (e.g. `lo`, `eth0`) |
# | HCCL | `HCCL_CONNECT_TIMEOUT` | link set-up timeout, s (120–7200, default 120) |
# | HCCL | `HCCL_EXEC_TIMEOUT` | wait for peers during a collective, s (default 1836 on A2/A3, 0 = never; in AIV mode 0–1091, default 1091; section 2) |
# | HCCL | `HCCL_ASYNC_ERROR_HANDLING` | torch_npu: end the process on an HCCL error (default 1) |
# | HCCL | `HCCL_IF_IP`, `HCCL_SOCKET_IFNAME` | the host IP, or interface, that reaches the root node while a communicator is created; picked automatically otherwise, and a pick that cannot reach the root's makes link set-up fail |
# | HCCL | `HCCL_WHITELIST_DISABLE` | 1 (the default): no IP allow-list; 0: only the IPs in `HCCL_WHITELIST_FILE` may communicate |
# | HCCL | `HCCL_BUFFSIZE` | buffer per communicator, MB (default 200; each communicator takes twice it) |
# | HCCL | `HCCL_ALGO` | force the inter-server algorithm, e.g. `level0:NA;level1:H-D_R` (notebook 05) |
# | HCCL | `RANK_TABLE_FILE` | the rank table JSON, when one describes the cluster |
# | HCCL | `ASCEND_GLOBAL_LOG_LEVEL` | CANN's log level, HCCL's included: 0 debug, 1 info, 2 warning, 3 error (the default), 4 none; the first thing to set, at 1 |
# | HCCL | `ASCEND_SLOG_PRINT_TO_STDOUT` | 1: print those logs on screen instead of to the log files (by default under `$HOME/ascend/log`) |
# | NCCL | `NCCL_DEBUG=WARN` (or `INFO`), `NCCL_DEBUG_SUBSYS` | NCCL's log; the first thing to set. `WARN` prints the reason behind an `ncclSystemError` or `ncclInvalidUsage`; `INFO` adds the version, topology and transports chosen |
# | NCCL | `NCCL_SOCKET_IFNAME` | which IP interfaces NCCL uses (prefixes, `^` to exclude, `=` for exact) |
# | NCCL | `NCCL_IB_HCA`, `NCCL_IB_DISABLE` | which InfiniBand/RoCE adapters, or none |
# | NCCL | `NCCL_P2P_DISABLE`, `NCCL_SHM_DISABLE` | turn a transport off, to test a suspected path (then remove it) |
# | NCCL | `NCCL_TOPO_FILE` | an XML topology to use instead of the detected one |
# | NCCL | `NCCL_ALGO`, `NCCL_PROTO` | force an algorithm or protocol (notebooks 04–06) |
# | NCCL | `TORCH_NCCL_ASYNC_ERROR_HANDLING`, `TORCH_NCCL_DUMP_ON_TIMEOUT`, … | PyTorch's watchdog settings (section 2) |
#
# NCCL's own documentation warns that the variables of its "Debugging" section
# should not stay in production scripts (they can cause slowdowns, crashes or
# hangs): set them to test a hypothesis, then remove them.
#
# **NCCL in a container** ([NCCL's troubleshooting
# guide](../../REFERENCES.md#troubleshooting)). NCCL's processes on one machine
# share memory segments in `/dev/shm` and pin host memory, and a Docker container
# starts with little of either: NCCL then fails to initialise. Start the container
# with `--shm-size=1g --ulimit memlock=-1`. With `NCCL_DEBUG=WARN` the failure says
# why (`NCCL WARN Error: failed to extend /dev/shm/nccl-… to … bytes`): NCCL prints
# a warning with the reason before it returns an `ncclSystemError` (an external
# call failed) or an `ncclInvalidUsage` (the program used NCCL wrongly, like two
# ranks on one GPU in section 5).
#
# ## 8. Exercises: fix three broken programs
#
# Each grader runs your fixed function on the ranks with a 10-second timeout, next
# to a working version, and compares the results rank by rank. If your program still
# hangs, it says where each rank was waiting (and restarts the ranks); if it
# crashes, which rank and which line; if a result is wrong, which ranks and how.
#
# ### Exercise 09.1: a rank with nothing to add
#
# `global_mean(values)` is called on every rank with that rank's 1-D tensor of
# values (losses, say) and must return, on every rank, the mean of *all* the values
# of all ranks. The grader gives one rank an empty tensor. The version in the
# comment hangs there (section 1a): fix it.

# %%
# Exercise 09.1: every rank takes part, even with no values
def global_mean(values):
    # The broken version:
    #     if values.numel() == 0:
    #         return torch.tensor(0.0)        # nothing to add: skip the collectives
    #     total = values.sum()
    #     count = torch.tensor(float(values.numel()))
    #     dist.all_reduce(total)
    #     dist.all_reduce(count)
    #     return total / count
    # BEGIN SOLUTION
    count = torch.tensor(float(values.numel()), device=values.device)
    both = torch.stack([values.sum(), count])  # an empty tensor sums to 0
    dist.all_reduce(both)  # every rank calls it: one collective instead of two, too
    return both[0] / both[1]
    # END SOLUTION


# %%
checks.check_global_mean(global_mean)

# %% [markdown]
# ### Exercise 09.2: gathering tensors of different lengths
#
# `gather_variable(values)` must return every rank's values concatenated in rank
# order, on every rank, when rank `r` holds `r + 1` values. The broken version
# all-gathers tensors of different shapes (section 3: a crash, or a DETAIL error).
# Fix it with collectives of equal shapes.

# %%
# Exercise 09.2: all_gather of tensors of different lengths
def gather_variable(values):
    # The broken version:
    #     pieces = [torch.empty_like(values) for _ in range(dist.get_world_size())]
    #     dist.all_gather(pieces, values)      # the shapes differ between ranks
    #     return torch.cat(pieces)
    # BEGIN SOLUTION
    size = dist.get_world_size()
    length = torch.tensor([values.numel()], device=values.device)
    lengths = [torch.empty_like(length) for _ in range(size)]
    dist.all_gather(lengths, length)  # first, everyone's length (same shape everywhere)
    longest = int(max(lengths))
    padded = torch.zeros(longest, dtype=values.dtype, device=values.device)
    padded[: values.numel()] = values
    pieces = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(pieces, padded)  # then the padded values (same shape everywhere)
    return torch.cat([piece[: int(n)] for piece, n in zip(pieces, lengths, strict=True)])
    # END SOLUTION


# %%
checks.check_gather_variable(gather_variable)

# %% [markdown]
# ### Exercise 09.3: a pipeline whose result never comes back
#
# `pipeline(x)` runs a pipeline of one stage per rank: stage `r` receives its input
# from stage `r − 1` (rank 0 starts from `x`), computes `2·x + r`, and sends the
# result on; the last stage sends its result back to rank 0, which then broadcasts
# it, so that every rank returns the pipeline's output. The version in the comment
# hangs (section 1b). Use the grader's message to find where, then fix it.

# %%
# Exercise 09.3: every send needs its receive
def pipeline(x):
    rank, size = dist.get_rank(), dist.get_world_size()
    # The broken version:
    #     if rank > 0:
    #         dist.recv(x, src=rank - 1)
    #     x = x * 2 + rank
    #     dist.send(x, dst=(rank + 1) % size)   # the last stage sends back to rank 0
    #     dist.broadcast(x, src=0)
    #     return x
    # BEGIN SOLUTION
    if rank > 0:
        dist.recv(x, src=rank - 1)
    x = x * 2 + rank
    dist.send(x, dst=(rank + 1) % size)
    if rank == 0:
        dist.recv(x, src=size - 1)  # the matching receive for the last stage's send
    dist.broadcast(x, src=0)
    return x
    # END SOLUTION


# %%
checks.check_pipeline(pipeline)

# %% [markdown]
# ## Recap
#
# | symptom | first look | usual cause | fix |
# |---|---|---|---|
# | a hang | each rank's stack (`CollectiveTimeout`, `py-spy dump`) | a rank took another path; a send without a receive; groups built differently | same collectives, same order, on every rank; pair every send with a receive; `new_group` on every rank |
# | "who is missing?" | `monitored_barrier` on a gloo side group | a rank stuck or dead elsewhere | look at that rank's stack and log |
# | a timeout error | the group's timeout: `init_process_group` / `new_group(timeout=…)`, `HCCL_EXEC_TIMEOUT`, NCCL's watchdog (`SeqNum`, `OpType`) | the same as a hang, or a rank that is just slow | find the hang; raise the timeout only for work that is really slow |
# | a crash or a wrong result after a collective | `TORCH_DISTRIBUTED_DEBUG=DETAIL` | shapes, dtypes or order differ (an op difference is *not* caught) | same call on every rank; pad to one shape |
# | torchrun stops before your code | its last error line (`RendezvousTimeoutError` under c10d) | port in use, wrong `MASTER_ADDR`, a node missing | free port; reachable address; same `--nnodes` everywhere, every node started |
# | torchrun's `ChildFailedError` | its "Root Cause": rank, exit code, host; then that rank's output | your code raised, or the worker was killed (a negative exit code: a signal) | read that rank's error; `@record` keeps its traceback |
# | "duplicate device", invalid device | `LOCAL_RANK` vs `RANK`; under Slurm, what each task sees | `set_device(rank)`, no `set_device`, or device 0 in every task | `set_device(LOCAL_RANK)`, with every device visible to the task |
# | NCCL fails to initialise in a container | `NCCL_DEBUG=WARN` | too little `/dev/shm` or pinned memory | `--shm-size=1g --ulimit memlock=-1` |
#
# And two habits: give debugging runs **short timeouts** (`init_process_group(timeout=…)`,
# `--rdzv-conf=timeout=…` or `join_timeout=…`) so a mistake costs seconds, not the
# default 10–30 minutes;
# and check every call and variable against its documentation (section 6).
#
# **Where to go next:** 10 · Capstone: train a small model with your own bucketed,
# overlapped data parallelism, graded against a single process. When it hangs, you
# know where to look.

# %%
# %ranks shutdown
