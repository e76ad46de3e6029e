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
# # 09 · Troubleshooting: hangs, timeouts, mismatches, rendezvous
#
# A distributed job rarely fails on the line that is wrong: it hangs, or times out
# minutes later in a call that is fine, or finishes with quietly wrong numbers.
#
# - a hang: **where is each rank waiting?**
# - timeouts: which clock, and where it is set (gloo, NCCL, HCCL)
# - mismatched collectives and `TORCH_DISTRIBUTED_DEBUG=DETAIL`
# - `torchrun` rendezvous failures; `LOCAL_RANK`, not `RANK`

# %% [markdown] slideshow={"slide_type": "notes"}
# **1 min.** Every failure in this deck is deliberate and short: a hang costs
# 3 seconds here, never a stuck notebook. The notebook is a lab of broken
# programs, each as symptom → diagnosis → fix; in a one-day workshop it is
# homework, and this deck is the tour.

# %% slideshow={"slide_type": "skip"}
import sys
import textwrap

import labsupport as lab
from labsupport.runtime import diagnose
from labsupport.runtime.torchrun import failure_cases, port_in_use, run_torchrun
from labsupport.runtime.viz.waitfor import draw_wait_for

# %load_ext labsupport

# %% slideshow={"slide_type": "skip"}
# One group for the whole deck, started with DETAIL on (slide "Mismatched collectives");
# DETAIL checks collectives only, so the point-to-point hang below is the same without it.
# No spare group: the one restart (after the hang) is the only other start-up.
cluster = lab.Cluster(4, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, standby=False)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: a send that nobody receives
#
# Rank 0 sends a length, then the data; rank 1 receives the length and moves on.
# **Predict:** what does each rank do?

# %% slideshow={"slide_type": "-"} tags=["raises-exception", "nbval-ignore-output"]
# %%ranks --timeout 3
if rank == 0:
    dist.send(torch.tensor([3.0]), dst=1)  # the length...
    dist.send(torch.arange(3.0), dst=1)  # ...then the data
elif rank == 1:
    length = torch.empty(1)
    dist.recv(length, src=0)
    print("rank 1 got the length", length.item(), "and forgot to receive the data")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** On gloo a blocking `send` returns only when the receiver has
# taken the data (notebook 02), so rank 0 waits forever. After 3 s
# (`--timeout 3`) the launcher raises `CollectiveTimeout` with every blocked
# rank's Python stack (read with `faulthandler`, which works even inside C++)
# and restarts the ranks. Learners expect a small message to "just go
# through": on some backends it is buffered and the bug hides until messages
# grow. On a cluster, `py-spy dump --pid <pid>` gives the same stacks.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Diagnosis: one line per rank, and the wait-for picture

# %% slideshow={"slide_type": "-"}
hang = sys.last_value  # the error the cell above raised
diagnose.print_where_blocked(hang, world_size=4)
fig = draw_wait_for(hang.stacks, world_size=4)
fig.set_size_inches(3.2, 2.8)

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Only rank 0 is blocked, in `send`, to rank 1; rank 1 finished.
# An arrow to a rank that waits for nobody: no cycle, so not a deadlock
# between ranks (notebook 02's red cycle) but a message with no receiver.
# Fix: every `send` needs a `recv` with the same peer, size and dtype; write
# the sender and receiver of a message next to each other. Exercise 09.3 is
# this bug in a pipeline. The ranks that finished have no stack: in a hang,
# the rank that is *not* where the others are is usually the culprit.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The commonest hang: a rank skips a collective
#
# ```python
# if rank != 3:            # rank 3 "has nothing to add" this time...
#     dist.all_reduce(x)
# dist.barrier()           # ...and everyone meets here
# ```
#
# Stacks: ranks 0–2 in `all_reduce`, rank 3 already in `barrier`. Collectives are
# matched by **order on the group**, not by name.
#
# **Fix:** every rank calls every collective, same number, same order; nothing to add → contribute 0.
#
# Who is missing? `dist.monitored_barrier(group=probe, timeout=…, wait_all_ranks=True)` on a gloo side group: rank 0 names them.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Not run here (the notebook runs it, and exercise 09.1 is this
# bug). Rank 3's barrier does not pair with the others' all-reduce: each side
# waits for a message the other never sends; with other sizes or backends
# such a pair can crash, or complete with meaningless data. `monitored_barrier`
# is a debugging tool: rank 0 talks to every rank one by one, and a failure
# leaves its group unusable, hence the side group
# (`probe = dist.new_group(backend="gloo")`).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Timeouts: which clock, where it is set
#
# | | where | default |
# |---|---|---|
# | process group | `init_process_group(timeout=…)`, `new_group(timeout=…)` | 10 min NCCL, 30 min others |
# | NCCL watchdog | `TORCH_NCCL_ASYNC_ERROR_HANDLING`, `TORCH_NCCL_DUMP_ON_TIMEOUT`, `TORCH_NCCL_DESYNC_DEBUG` | tears the process down |
# | HCCL link set-up | `HCCL_CONNECT_TIMEOUT` (s, 120–7200) | 120 |
# | HCCL execution | `HCCL_EXEC_TIMEOUT` (s; 0 = never) | 1836 on Atlas A2/A3; 1091 in AIV mode (max, and what 0 means) |
#
# gloo: `Timed out waiting 2000ms for recv operation to complete` — which transfer, not which rank.
# NCCL: `WorkNCCL(SeqNum=5, OpType=ALLREDUCE, …) ran for 600013 milliseconds`: compare `SeqNum` and `OpType` across ranks.

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Two clocks in this course: the launcher's `--timeout` (a
# notebook convenience) and the group's own (the one that fires on a real
# cluster). Sources: torch.distributed's documentation, PyTorch's
# ProcessGroupNCCL environment variables, CANN's environment variable
# reference (REFERENCES.md, troubleshooting). torch_npu's documentation advises an
# `init_process_group` timeout *longer* than both HCCL timeouts, so HCCL's
# more precise error comes first. HCCL's messages from users' reports:
# `EI0006: Getting socket times out` at link set-up, `EI0002: The wait
# execution of the Notify register times out` during execution. The habit:
# short timeouts while debugging, so a mistake costs seconds, not 30 minutes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: `TORCH_DISTRIBUTED_DEBUG=DETAIL` turns the skip into an error
#
# These ranks were started with DETAIL: every collective is fingerprinted (op, sequence number, shapes, dtypes) and compared first.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
# %%ranks --timeout 20
from labsupport.runtime import diagnose

x = torch.ones(3, device=device)
try:
    if rank != 3:
        dist.all_reduce(x)
    dist.barrier()
except RuntimeError as err:  # what DETAIL says differs, read by labsupport.runtime.diagnose
    print(diagnose.detail_summary(str(err)))

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** No hang: every rank raises at once, at `SequenceNumber=0`, and
# one rank reports something different (rank 3 a `BARRIER`, the others an
# `ALLREDUCE`). What to read: which rank is the odd one out, and at which
# sequence number. The op named for the *other* side is unreliable (it has
# named ops nobody called). The notebook lets the error reach the cell and
# reads it with `diagnose.mismatch_aspects`. DETAIL costs an extra exchange
# per call and is read when the group is created: set it in the shell before
# `torchrun` (`%%ranks --env ...` here), and only while debugging.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Predict: which of the four does DETAIL catch?
#
# shape (2 vs 3 elements), dtype (float64 on rank 1), order (broadcast vs all-reduce first), op (MAX on rank 2)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
# %%ranks --show 0
from labsupport.runtime.diagnose import four_mismatches  # notebook 09's function

for case, result in four_mismatches(rank, device).items():
    print(f"{case:6} {result}")

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** Take votes before running. `diagnose.four_mismatches` is the
# notebook's function: rank 0 has 2 elements (the others 3); rank 1 reduces
# float64; rank 0 broadcasts before its all-reduce, the others after; rank 2
# asks for MAX, the others for SUM. Shape, dtype and order (reported as
# the op *type*) raise on every rank, before any data moves, so the group
# keeps working. A different **reduce op** is not in the fingerprint: the
# call goes through and the result is neither the sum nor the maximum,
# silently. Only a test against a known answer catches that (the course's
# graders do). Without DETAIL, a shape mismatch in an `all_gather` on gloo
# kills the receiving rank with "Received data size doesn't match expected
# size" (exercise 09.2).

# %% slideshow={"slide_type": "skip"}
cluster.shutdown()  # the ranks are done; the launchers below start their own processes

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: five `torchrun` launches that fail, at once
#
# Real launchers, rendezvous timeout 3 s (static default 900 s; c10d `join_timeout` default 600 s):

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
with port_in_use() as busy:
    cases = failure_cases(busy, timeout=3)  # notebook 09's five launches
    runs = run_torchrun(list(cases.values()), timeout=120)
for case, run in zip(cases, runs, strict=True):
    print(f"{case}: exit code {run.returncode} after {run.seconds:.1f} s")
    print("  " + textwrap.shorten(run.error_line(), 110))

# %% [markdown] slideshow={"slide_type": "notes"}
# **3 min.** How to read them. `EADDRINUSE`: node 0 could not open the store;
# another `--master-port`, or find the holder (`ss -ltnp`), often a previous
# run. "The client socket has timed out ... while trying to connect to": a
# client could not reach the store; check `MASTER_ADDR` from that node (`nc
# -zv addr port`), firewalls, that node 0 is up. "waiting for clients. 1/2
# clients joined": the store was up, a node never came; compare `--nnodes`
# everywhere, look for a node that crashed before joining. Under the c10d
# rendezvous (`--rdzv-backend=c10d`, torchrun's multi-node recipe and the
# course's Slurm scripts) the same missing node is a `RendezvousTimeoutError`
# with no message at all. A crashing worker ends in `ChildFailedError`: read its
# "Root Cause" (rank, exit code, host), then that rank's output. Most of each
# case's time is start-up: every launcher imports torch, all at once on the
# laptop's cores. `labsupport.runtime.torchrun` kills each launcher and what it started
# at the deadline.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which device is mine? `LOCAL_RANK`, not `RANK`
#
# 2 servers × 8 devices: `RANK = node_rank × 8 + LOCAL_RANK` runs 0–15, a device index 0–7.
#
# ```python
# local_rank = int(os.environ["LOCAL_RANK"])
# torch.npu.set_device(local_rank)   # HCCL (torch_npu); NCCL: torch.cuda.set_device(local_rank)
# dist.init_process_group("hccl")    # or "nccl"
# ```
#
# - `set_device(rank)`: fine on one server, invalid device on the second
# - no `set_device`: all on device 0 (`Duplicate GPU detected`), or 8 processes sharing one device

# %% [markdown] slideshow={"slide_type": "notes"}
# **1 min.** The duplicate-GPU message is NCCL's `ncclInvalidUsage ...
# Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000`, from a
# user report (NVIDIA/Megatron-LM issue 661). The course's launcher and
# `examples/hello_ranks.py` do exactly the three lines above.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Names that circulate: wrong, or out of date
#
# | you may see | use instead |
# |---|---|
# | `torch.npu.set_config(topology_aware=True)` | nothing to switch on; `HCCL_ALGO` to force an algorithm |
# | `torch_npu.npu.topology` | `npu-smi info -t topo` on the server |
# | `dist.GroupMember.NON_INCLUSIVE_GROUP` | `dist.GroupMember.NON_GROUP_MEMBER` |
# | `torch.distributed.dist_c10d` | `torch.distributed` |
# | `NCCL_TOPOLOGY_FILE`, `NCCL_SOCKET_NIC_TOPOLOGY` | `NCCL_TOPO_FILE`; `NCCL_SOCKET_IFNAME` |
# | `python -m torch.distributed.launch` (deprecated) | `torchrun`, `LOCAL_RANK` from the environment |
#
# Logs first: `NCCL_DEBUG=WARN`; on HCCL `ASCEND_GLOBAL_LOG_LEVEL=1 ASCEND_SLOG_PRINT_TO_STDOUT=1` (NCCL's variables mean nothing to HCCL). Then interfaces: `HCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`, `NCCL_SOCKET_IFNAME`.
#
# **Now:** notebook 09 (homework in the one-day plan; exercises 09.1–09.3). **Next:** 10 · capstone.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** These names come from blog posts and generated code; the
# notebook checks the PyTorch ones on this installation (the torch_npu ones
# need an Ascend machine; `torch.distributed.launch` still exists, deprecated).
# `HCCL_WHITELIST_DISABLE`, by contrast, is real. In a container, NCCL needs
# `--shm-size=1g --ulimit memlock=-1` (NCCL's troubleshooting guide). On Slurm,
# `examples/slurm/` has ready sbatch scripts (notebook 09, section 5).
# NCCL's own documentation warns that its debugging variables should not stay
# in production scripts: set them to test a hypothesis, then remove them. The
# notebook's section 7 has the full table of variables, each with its source.
