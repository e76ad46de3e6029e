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

# %% [markdown] slideshow={"slide_type": "slide"}
# # 07 · Overlapping communication with computation
#
# Backward produces the **last** layer's gradients first: they can travel
# while earlier layers are still being differentiated.
#
# - asynchronous handles: `async_op=True`, `Work.wait()`, futures
# - data parallel by hand: naive → flat → hooks (overlap) → buckets
# - per-rank timelines; what overlap can hide; DDP overlap is not 1F1B

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** Everything of the morning comes together: async collectives (01),
# the ring's cost (03, 04), honest timing (06). The versions live in
# `labsupport.ddp`; learners write the overlapped and bucketed ones.

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt

import labsupport as lab
from labsupport import ddp, netem, trace

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Live: issue first, wait later
#
# 120 small matrix products and a 4 MiB all-reduce, on an emulated 100 MB/s network:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
def blocking_then_async(nbytes=4 << 20, products=120):
    """On every rank: seconds (slowest rank) for compute-then-all_reduce and for the overlap."""
    import time

    import torch
    import torch.distributed as dist

    a, x = torch.randn(192, 192), torch.ones(nbytes // 4)
    times = []
    for overlap in (False, True):
        dist.barrier()
        start = time.perf_counter()
        if overlap:
            work = dist.all_reduce(x, async_op=True)  # returns at once
            for _ in range(products):
                a @ a  # runs while the all-reduce is in flight
            work.wait()  # only now is x reduced
        else:
            for _ in range(products):
                a @ a
            dist.all_reduce(x)
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


SLOW = netem.Network(inter=netem.Link(latency=200e-6, bandwidth=100e6), ranks_per_node=1)
cluster = lab.Cluster(4, network=SLOW)
cluster.run(ddp.use_threads)
blocking, overlapped = cluster.run(blocking_then_async)[0]
print(f"compute, then all_reduce: {blocking * 1e3:6.1f} ms")
print(f"all_reduce in flight while computing: {overlapped * 1e3:6.1f} ms")

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** Ask for a prediction: the overlapped version should be close to
# max(compute, communication) instead of their sum. On a busy laptop the
# emulator's threads compete with the products for the cores, so the gain can
# shrink: say so if it happens, it is itself a lesson (overlap needs spare
# resources: on a GPU, a separate stream and copy engines). Between issue and
# `wait()` the tensor `x` is off limits.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Hooks: all-reduce a gradient as soon as it exists
#
# ```python
# for p in model.parameters():
#     p.register_post_accumulate_grad_hook(self.hook)   # hook(param), not hook(grad)!
#
# def hook(self, param):
#     param.grad.div_(world_size)
#     self.handles.append(dist.all_reduce(param.grad, async_op=True))
#
# def finish(self):                 # before optimizer.step()
#     for h in self.handles: h.wait()
# ```
#
# Buckets: fewer, larger messages; one α per bucket instead of one per tensor.

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Two bugs seen in real code: all-reducing the hook's *argument*
# (the parameter: that all-reduces the weights), and waiting after
# `optimizer.step()` (each rank then updates with its own partial gradient and
# the replicas drift apart silently). torch's DDP is this design in C++, with
# `bucket_cap_mb=25` by default, buckets in reverse parameter order, rebuilt
# after the first iteration.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Per-rank timelines: naive vs bucketed
#
# Compute emulated as on an accelerator (layers sleep, the host CPU stays free; gradients unchanged), measured first; the emulated network is chosen so that one all-reduce of all gradients costs ~80 % of backward.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
CFG = ddp.Config(in_features=256, hidden=256, layers=4, out_features=16, batch=16,
                 compute_ms=30)  # fmt: skip
compute = cluster.run(ddp.time_compute, 3, 1, CFG)[0]
NET = ddp.network_for(compute["backward"], CFG.param_bytes(), 4, latency=200e-6, ratio=0.8)
cluster.run(netem.set_network, NET)
COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "wait": "0.7",
           "optimizer": "tab:green", "all_reduce": "tab:red"}  # fmt: skip
for name in ("naive", "bucket"):
    out = cluster.run(ddp.time_steps, name, 2, 1, CFG, 256 << 10)
    spans = [s for s in trace.merge(o["spans"] for o in out) if s.rank in (0, 1)]
    lab.viz.plot_timeline(spans, colors=COLOURS,
                          title=f"{name}: median step {out[0]['median'] * 1e3:.1f} ms, ranks 0-1")  # fmt: skip
    plt.show()
cluster.shutdown()

# %% [markdown] slideshow={"slide_type": "notes"}
# **5 min.** Read left to right. Naive: compute, then a staircase of
# all-reduces during which nobody computes. Bucketed: the red bars start
# inside the orange backward bar; the grey `wait` before the optimizer is what
# did not fit. A span runs from call to completion, so it includes waiting for
# the slowest peer: compare *end* times across ranks, not durations. Why
# emulated compute: with real CPU compute, four ranks' backward passes fill a
# laptop's cores and the network's threads wait for one, so overlap hides
# little; on an NPU or GPU the host is free while the device computes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## What overlap can hide
#
# Bucket $k$ is ready at $F + B\cdot\frac{\text{bytes so far}}{\text{all bytes}}$ and costs $2(p-1)\alpha + 2\frac{p-1}{p}n_k\beta$; one link:
#
# $$\text{step} = \max\big(F + B,\ \text{end of the last all-reduce}\big) + O
# \qquad\text{vs.}\qquad F + B + \textstyle\sum_k T_k + O$$
#
# The last bucket is ready only when backward ends: it can never hide.

# %% [markdown] slideshow={"slide_type": "notes"}
# **4 min.** `ddp.predict_step` is this formula; the notebook compares it with
# a bucket-size sweep. Too small buckets pay α many times; too large ones
# start late and leave a big last bucket. That is the trade-off behind
# `bucket_cap_mb`.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## DDP overlap is not 1F1B
#
# - **DDP overlap**: one model replica per rank; gradients all-reduced during backward
# - **1F1B**: pipeline parallelism; stages alternate one forward, one backward
#   micro-batch; idle/busy $= (p-1)/m$
#
# **Now:** notebook 07, 45 min. **Next:** 08 · scaling and compression.

# %% [markdown] slideshow={"slide_type": "notes"}
# **2 min.** A popular article calls DDP-style overlap "1F1B", and its code
# waits after the optimizer step: both wrong. The notebook draws a 1F1B
# schedule for 4 stages and 8 micro-batches and checks the bubble formula.
