"""Today's offences in the stored outputs (see test_stored_outputs.py), to fix and then remove.

Per notebook, (rule, the exact offending line). The test accepts these and fails on any
other offence, and on any entry here that no longer occurs: when you fix one, delete its
line. Never add one: fix the output instead (this list only shrinks, to empty).

Listed when the check was written (issue 28), before the fixes of that round.
"""

# ruff: noqa: E501

KNOWN: dict[str, list[tuple[str, str]]] = {
    "notebooks/solutions/00_welcome.ipynb": [
        (
            "wide",
            "  auto picks  gloo on cpu: gloo can run 4 rank(s); not hccl: torch_npu is not installed (only needed on Ascend machines); not nccl: no CUDA GPU is visible",
        ),
    ],
    "notebooks/solutions/02_point_to_point.ipynb": [
        (
            "wide",
            "CollectiveTimeout: ranks 0, 1, 2, 3 did not finish within 3 s: each rank's stack shows where it is blocked (a rank waiting for a peer that never sends is a deadlock).",
        ),
        (
            "wide",
            "CollectiveTimeout: ranks 1, 2, 3 did not finish within 3 s: each rank's stack shows where it is blocked (a rank waiting for a peer that never sends is a deadlock).",
        ),
        (
            "wide",
            "[labsupport] replacing Cluster(world_size=4, backend='gloo', running) to match: %%ranks --env TORCH_DISTRIBUTED_DEBUG=DETAIL --timeout 20",
        ),
        (
            "wide",
            "RankError: rank 2 raised RuntimeError: Detected mismatch between collectives on ranks. Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[3], TensorDtypes=Float, TensorDeviceTypes=TensorOp…",
        ),
        (
            "wide",
            "(ranks 0, 1, 3 also raised RuntimeError, e.g. rank 0: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0, O…)",
        ),
        (
            "wide",
            "RuntimeError: Detected mismatch between collectives on ranks. Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[3], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[2], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))).Collectives differ in the following aspects:   Tensor Tensor shapes: 3vs 2",
        ),
        (
            "wide",
            "CollectiveTimeout: ranks 0, 1, 3, 6 did not finish within 3 s: each rank's stack shows where it is blocked (a rank waiting for a peer that never sends is a deadlock).",
        ),
    ],
    "notebooks/solutions/03_ring_allreduce.ipynb": [
        (
            "wide",
            "[Transfer(src=0, dst=1, chunks=range(2, 3), reduce=True), Transfer(src=1, dst=2, chunks=range(0, 1), reduce=True), Transfer(src=2, dst=0, chunks=range(1, 2), reduce=True)]",
        ),
        (
            "wide",
            "this machine, 4 ranks: all_reduce (ring): α = 1.09e+03 µs, β = 2.53 ns/B (1/β = 0.395 GB/s), RMS residual 26.3% over 3 points",
        ),
    ],
    "notebooks/solutions/06_measuring_bandwidth.ipynb": [
        (
            "wide",
            "# labsupport.bench all_reduce: nranks 2 backend gloo minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 3 iters: 10 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "# labsupport.bench all_reduce: nranks 2 backend gloo minBytes 1024 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "# labsupport.bench all_gather: nranks 2 backend gloo minBytes 1024 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "# labsupport.bench reduce_scatter: nranks 2 backend gloo minBytes 1024 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "# labsupport.bench all_reduce: nranks 2 backend gloo minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 50 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "# labsupport.bench all_reduce: nranks 4 backend gloo minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 50 validation: 1 average: 1(avg)",
        ),
        (
            "wide",
            "-> 4 ranks on 2 cores: far above the model. Each message also waits for the receiving rank to get a core, so 'α' measures the scheduler.",
        ),
        (
            "wide",
            "-> busbw exceeds one NIC's line rate: one NIC cannot have been the bottleneck, so 'percent of the NIC' says nothing about this run (or the time is not real).",
        ),
    ],
    "notebooks/solutions/07_overlap.ipynb": [
        (
            "wide",
            "Issuing the all-reduce first and waiting later took 0.50x the time of doing one after the other (the floor is max(compute, all-reduce), 0.50x).",
        ),
        (
            "wide",
            "float32 gradient sizes, in the order backward produces them (bytes): [64, 32768, 2048, 1048576, 2048, 1048576, 2048, 524288]",
        ),
        (
            "wide",
            "model: 104.1 ms per step with the optimizer after the last all-reduce, 103.6 ms with each bucket stepped after its own (0.5 ms less)",
        ),
        (
            "wide",
            "Ψ = 696,208 parameters (2.78 MB in float32). Per rank per step: DDP 1.50·Ψ = 4.18 MB (the paper's ≈2Ψ is the large-p limit), ZeRO-3 2.25·Ψ = 6.27 MB (1.5× DDP's)",
        ),
    ],
    "notebooks/solutions/10_capstone.ipynb": [
        (
            "wide",
            "largest relative loss difference over 20 steps: 1.6e-07; largest weight difference, any rank: 1.9e-04 (the learning rate is 0.003)",
        ),
        (
            "wide",
            " DDP (yours): 16.00 bytes per parameter on rank 0 (parameters 1.67 MB, gradients 1.67 MB, optimizer state 3.34 MB, optimizer's weights 0.00 MB)",
        ),
        (
            "wide",
            "      ZeRO-1: 11.00 bytes per parameter on rank 0 (parameters 1.67 MB, gradients 2.09 MB, optimizer state 0.83 MB, optimizer's weights 0.00 MB)",
        ),
        (
            "wide",
            "DDP + ZeRO-1: 11.00 bytes per parameter on rank 0 (parameters 1.67 MB, gradients 2.09 MB, optimizer state 0.83 MB, optimizer's weights 0.00 MB)",
        ),
        (
            "wide",
            "DDP with a steady rate of gradients: model 111.5 ms; the buckets of this model become ready at (ms from the step's start): 64, 65, 67, 97, 98, 100, 100",
        ),
    ],
    "notebooks/zh_CN/solutions/00_welcome.ipynb": [
        (
            "wide",
            "  auto picks  gloo on cpu: gloo can run 4 rank(s); not hccl: torch_npu is not installed (only needed on Ascend machines); not nccl: no CUDA GPU is visible",
        ),
    ],
    "slides/00_welcome.ipynb": [
        (
            "wide",
            "  auto picks  gloo on cpu: gloo can run 4 rank(s); not hccl: torch_npu is not installed (only needed on Ascend machines); not nccl: no CUDA GPU is visible",
        ),
    ],
    "slides/02_point_to_point.ipynb": [
        (
            "wide",
            "CollectiveTimeout: ranks 0, 1, 2, 3 did not finish within 3 s: each rank's stack shows where it is blocked (a rank waiting for a peer that never sends is a deadlock).",
        ),
    ],
    "slides/06_measuring_bandwidth.ipynb": [
        (
            "wide",
            "# labsupport.bench all_reduce: nranks 2 backend gloo minBytes 1024 maxBytes 1048576 step: 8(factor) warmup iters: 3 iters: 10 validation: 1 average: 1(avg)",
        ),
    ],
    "slides/10_capstone.ipynb": [
        (
            "wide",
            "largest relative loss difference over 12 steps: 1.1e-07; largest weight difference, any rank: 9.3e-05 (float32, AdamW eps 1e-8)",
        ),
        (
            "wide",
            "   DDP: 16.00 bytes per parameter on rank 0 (parameters 1.67 MB, gradients 1.67 MB, optimizer state 3.34 MB, optimizer's weights 0.00 MB); sent per step 1.000 × a ring all-reduce",
        ),
        (
            "wide",
            "ZeRO-1: 11.00 bytes per parameter on rank 0 (parameters 1.67 MB, gradients 2.09 MB, optimizer state 0.83 MB, optimizer's weights 0.00 MB); sent per step 1.000 × a ring all-reduce",
        ),
    ],
    "slides/zh_CN/00_welcome.ipynb": [
        (
            "wide",
            "  auto picks  gloo on cpu: gloo can run 4 rank(s); not hccl: torch_npu is not installed (only needed on Ascend machines); not nccl: no CUDA GPU is visible",
        ),
    ],
}
