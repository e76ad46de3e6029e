"""Half-precision all-reduce: the same elements in 2 bytes instead of 4.

Start at :func:`fp16_allreduce`; :func:`bf16_allreduce_hook` is the DDP hook for bfloat16.
"""

import torch
import torch.distributed as dist


def fp16_allreduce(flat: torch.Tensor, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """The average over the ranks of ``flat``, sent in ``dtype`` (float16 by default).

    What torch's ``fp16_compress_hook`` does to a DDP bucket: cast, divide, all-reduce,
    cast back.
    """
    # Divide by the world size before the sum, so that the sum does not overflow float16's
    # largest value, 65504. float16 keeps 11 significant bits (about 3 decimal digits), so
    # each averaged gradient carries a relative rounding error of up to about 2⁻¹¹ ≈ 0.05 %,
    # and values below about 6e-8 become 0.
    half = flat.to(dtype).div_(dist.get_world_size())
    dist.all_reduce(half)
    return half.to(flat.dtype)


def bf16_allreduce_hook(
    process_group: dist.ProcessGroup | None, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """A DDP comm hook: the bucket averaged in bfloat16 (torch's ``bf16_compress_hook``'s code).

    Registered under this name, DDP accepts it on gloo.
    """
    # bfloat16 keeps float32's exponent range with 8 significant bits. torch's
    # bf16_compress_hook does the same, but DDP's register_comm_hook refuses any hook
    # *named* bf16_compress_hook unless CUDA with NCCL >= 2.10 (or XPU) is present, although
    # gloo in torch 2.13 all-reduces bfloat16 tensors: this is the same code under another name.
    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(dist.get_world_size(group))
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f: torch.futures.Future) -> torch.Tensor:
        buffer.copy_(f.value()[0])
        return buffer

    return fut.then(decompress)
