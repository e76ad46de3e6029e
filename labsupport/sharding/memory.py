"""What a rank holds and sends per step under DDP and ZeRO-1, 2, 3: the formulas, in one place.

Start at :func:`model_states` (bytes per rank, by stage), then :func:`step_bytes` (bytes a
rank sends per step). In the ZeRO paper's notation (Rajbhandari et al. 2020, §3 and §7)
Ψ is the number of parameters and N_d the data-parallel ranks (``p`` here). Notebooks
07, 10 and 11 all read their numbers from here.
"""

from __future__ import annotations

#: Bytes per parameter of (parameters, gradients, optimizer state), by how one trains.
#: ``"fp32 AdamW"``: what the course trains, float32 everywhere: 4Ψ + 4Ψ + 8Ψ (Adam's two
#: moments). ``"mixed AdamW"``: the paper's mixed precision, fp16 parameters and gradients
#: and an fp32 master copy with the two moments: 2Ψ + 2Ψ + KΨ with K = 12.
PRECISIONS: dict[str, tuple[int, int, int]] = {
    "fp32 AdamW": (4, 4, 8),
    "mixed AdamW": (2, 2, 12),
}
#: What each stage shards over the p ranks: (parameters, gradients, optimizer state).
#: Stage 0 is plain data parallelism (DDP): everything replicated.
SHARDED: dict[int, tuple[bool, bool, bool]] = {
    0: (False, False, False),
    1: (False, False, True),  # P_os: the optimizer state
    2: (False, True, True),  # P_os+g: and the gradients
    3: (True, True, True),  # P_os+g+p: and the parameters (FSDP's FULL_SHARD)
}
NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def model_states(psi: int, stage: int, p: int, precision: str = "fp32 AdamW") -> dict[str, float]:
    """Bytes of model states one rank holds: ``{"parameters", "gradients", "optimizer state"}``.

    A sharded part is divided by ``p``; activations, temporary buffers and the layer a
    ZeRO-3 rank has gathered for the moment are not model states (the paper's §3).
    """
    per_param = PRECISIONS[precision]
    parts = ("parameters", "gradients", "optimizer state")
    return {
        part: psi * nbytes / (p if sharded else 1)
        for part, nbytes, sharded in zip(parts, per_param, SHARDED[stage], strict=True)
    }


def total(psi: int, stage: int, p: int, precision: str = "fp32 AdamW") -> float:
    """All of :func:`model_states` together: 16Ψ for DDP in either precision, 16Ψ/p for ZeRO-3."""
    return sum(model_states(psi, stage, p, precision).values())


def collectives(stage: int) -> list[tuple[str, str]]:
    """The collectives of one step, each over all the parameters: (name, when it runs).

    A ring all-reduce is a reduce-scatter then an all-gather (notebook 03): DDP, ZeRO-1
    and ZeRO-2 send the same two halves, ZeRO-3 one all-gather more, since the parameters
    it freed after forward must come back for backward.
    """
    if stage == 0:
        return [("all_reduce", "backward")]
    steps = [("reduce_scatter", "backward" if stage >= 2 else "step")]
    if stage == 3:
        return [("all_gather", "forward"), ("all_gather", "backward"), *steps]
    return [*steps, ("all_gather", "step" if stage == 1 else "forward")]


def step_bytes(psi: int, stage: int, p: int, element_size: int = 4) -> float:
    """Bytes one rank sends per step on a ring: 2(p−1)/p·Ψ elements, 3(p−1)/p·Ψ for ZeRO-3.

    Each reduce-scatter or all-gather of n bytes sends (p−1)/p·n per rank; an all-reduce
    sends twice that. ``element_size``: bytes per element on the wire (4 for float32;
    the paper's fp16, 2).
    """
    halves = sum(2 if name == "all_reduce" else 1 for name, _ in collectives(stage))
    return halves * (p - 1) / p * psi * element_size
