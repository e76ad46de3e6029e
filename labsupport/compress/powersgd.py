"""PowerSGD for one gradient matrix, written out: two small all-reduces instead of one big one.

Start at :class:`PowerSGD`; its ``__call__`` is the algorithm, line by line.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def orthonormalize(matrix: torch.Tensor) -> torch.Tensor:
    """Orthonormal columns spanning ``matrix``'s (its QR decomposition's Q)."""
    return torch.linalg.qr(matrix).Q


class PowerSGD:
    """Rank-``rank`` PowerSGD with warm start and error feedback, for one ``n × m`` gradient.

    Vogels, Karimireddy & Jaggi (2019): approximate the averaged gradient ``M`` (``n × m``)
    by a rank-``r`` product ``P Qᵀ`` found with one step of power iteration, and all-reduce
    the factors (``(n + m)·r`` numbers) instead of ``M`` (``n·m``). torch's
    ``powerSGD_hook`` does this for every matrix of a DDP bucket at once (the P's of all
    matrices in one all-reduce, the Q's in another), all-reduces the vectors (biases) and
    matrices too small to gain as they are, and starts compressing only after
    ``start_powerSGD_iter`` plain steps.

    ``error_feedback=False`` drops what the approximation missed (to see warm start alone).
    """

    def __init__(self, rank: int = 2, seed: int = 0, error_feedback: bool = True) -> None:
        self.rank = rank
        self.seed = seed
        self.error_feedback = error_feedback
        self.q: torch.Tensor | None = None
        self.error: torch.Tensor | None = None

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        """The rank-r approximation of the average over the ranks of ``grad`` (not changed)."""
        n, m = grad.shape
        r = min(n, m, self.rank)
        # Warm start: Q is kept from one step to the next (gradients change slowly), so one
        # power-iteration step per training step is enough; at the first step it is random,
        # from the same seed on every rank.
        if self.q is None:  # the same random start on every rank
            g = torch.Generator().manual_seed(self.seed)  # on the CPU: the same draw everywhere
            self.q = torch.randn(m, r, generator=g, dtype=grad.dtype).to(grad.device)
            self.error = torch.zeros_like(grad)
        matrix = grad + self.error  # error feedback: add what was lost last step
        # P = M Q, n × r, all-reduced: the sum over ranks of M_i Q = (Σ M_i) Q. Linearity is
        # what makes the all-reduce of the factors right: every rank multiplies by the same Q.
        p = matrix @ orthonormalize(self.q)
        dist.all_reduce(p)  # the sum is fine: only its column space matters
        p = orthonormalize(p)  # P = orthonormal columns of P
        q = matrix.T @ p  # Q = Mᵀ P, m × r, all-reduced and divided by p: the average Mᵀ P
        dist.all_reduce(q)
        q /= dist.get_world_size()
        approximation = p @ q.T  # P Qᵀ: the same on every rank
        if self.error_feedback:
            self.error = matrix - approximation  # kept on this rank for the next step
        self.q = q  # warm start
        return approximation
