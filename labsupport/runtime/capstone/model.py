"""The capstone's workload: a tiny transformer learning a generated language, with AdamW.

**The data** is generated, so nothing has to be downloaded: token sequences from a
fixed random Markov chain over ``vocab`` tokens (each token's next-token
distribution drawn once from ``cfg.seed``, peaked, so there is something to learn).
``global_batch(step)`` is the same on every rank and in the baseline; rank ``r`` of
``p`` trains on rows ``r*b/p .. (r+1)*b/p`` of it. No model can do better on this
data than the chain's entropy rate (:func:`entropy_rate`), so the loss curve has a
floor you can draw.

**The model** is a decoder-only transformer in the style of GPT-2 and nanoGPT:
token and position embeddings, ``layers`` pre-LayerNorm blocks of causal
self-attention and an MLP, a final LayerNorm and a linear head. The defaults have
about 0.42 M parameters (1.7 MB in float32); ``d_model=192`` makes it 3.7 MB.

**The optimizer** is AdamW with torch's defaults (``eps = 1e-8``) and two parameter
groups, as nanoGPT's ``configure_optimizers`` makes them: weight decay for the
matrices (2-D and more), none for biases and LayerNorm gains. Its update is
element by element, so running it on any slice of the parameters gives the same
numbers as on the whole model: what ZeRO-1 relies on.

:class:`GPTConfig` is a workload of :mod:`labsupport.ddp` (``ddp_runs.train(...,
cfg=GPTConfig())``); ``dtype=torch.float64`` is what the graders use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from labsupport.runtime.experiments.workload import Compute, Workload


@dataclass(frozen=True)
class GPTConfig(Workload):
    """Sizes of the model, the data and the optimizer. The defaults: about 1.7 MB of weights."""

    vocab: int = 64
    seq_len: int = 32
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    batch: int = 16  # sequences in the global batch, split evenly over the ranks
    lr: float = 3e-3
    weight_decay: float = 0.1  # for the matrices; biases and LayerNorm gains get none
    eps: float = 1e-8  # AdamW's, torch's default
    seed: int = 0
    compute_ms: float = 0.0  # > 0: emulated accelerator time after each block (timing only)
    dtype: torch.dtype = torch.float32
    optimizer_class = torch.optim.AdamW

    def make_model(self, seed: int | None = None) -> TinyTransformer:
        """The model, initialised from ``seed`` (default ``self.seed``), on the CPU."""
        torch.manual_seed(self.seed if seed is None else seed)
        return TinyTransformer(self).to(self.dtype)

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and next-token targets of ``step``: ``batch × seq_len`` token ids (CPU)."""
        g = torch.Generator().manual_seed(1000 * self.seed + step)
        p = transitions(self)
        tokens = torch.empty(self.batch, self.seq_len + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(self.vocab, (self.batch,), generator=g)
        for t in range(self.seq_len):
            tokens[:, t + 1] = torch.multinomial(p[tokens[:, t]], 1, generator=g).squeeze(1)
        return tokens[:, :-1], tokens[:, 1:]

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy, a mean over the tokens given (the ranks' means average to the batch's)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        """Weight decay for the matrices, none for biases and gains (nanoGPT's groups)."""
        params = list(model.parameters())
        return [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": self.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]

    def optimizer_defaults(self) -> dict[str, Any]:
        """AdamW's learning rate and eps (the groups set the weight decay)."""
        return {"lr": self.lr, "eps": self.eps}


class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then an MLP, each residual."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention, then the MLP, each on a residual branch."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyTransformer(nn.Module):
    """Embeddings, ``cfg.layers`` blocks, a final LayerNorm and a linear head (logits)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.heads:
            raise ValueError(f"d_model ({cfg.d_model}) must be a multiple of heads ({cfg.heads})")
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.Sequential(*(Block(cfg.d_model, cfg.heads) for _ in range(cfg.layers)))
        # After each block, the emulated compute of labsupport.ddp (no parameters).
        seconds = cfg.compute_ms / 1e3 / cfg.layers
        self.compute = Compute(seconds) if cfg.compute_ms > 0 else nn.Identity()
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits for each position of the token ids ``idx``."""
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block in self.blocks:
            x = self.compute(block(x))
        return self.head(self.ln(x))


def transitions(cfg: GPTConfig = GPTConfig()) -> torch.Tensor:
    """The Markov chain: row ``i`` is the distribution of the token after token ``i``."""
    g = torch.Generator().manual_seed(10_000 + cfg.seed)
    logits = 3.0 * torch.randn(cfg.vocab, cfg.vocab, generator=g)  # peaked rows
    return torch.softmax(logits, dim=1)


def entropy_rate(cfg: GPTConfig = GPTConfig()) -> float:
    """The chain's entropy in nats per token: the lowest mean loss any model can reach."""
    p = transitions(cfg).double()
    stationary = torch.full((cfg.vocab,), 1.0 / cfg.vocab, dtype=torch.float64)
    for _ in range(500):  # power iteration
        stationary = stationary @ p
    per_row = -(p * p.clamp_min(1e-300).log()).sum(dim=1)
    return float(stationary @ per_row)


def initial_loss(cfg: GPTConfig = GPTConfig()) -> float:
    """The loss of a model that knows nothing (uniform over the vocabulary): ln(vocab)."""
    return math.log(cfg.vocab)
