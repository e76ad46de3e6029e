"""The capstone's model, data and optimizer: a tiny transformer learning a generated language.

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

**The optimizer** is AdamW: two state tensors per parameter (first and second
moments), which is what ZeRO-1 shards. Its update is element by element, so
running it on any slice of the flattened parameters gives the same numbers as on
the whole model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from labsupport.ddp.model import Compute


@dataclass(frozen=True)
class Config:
    """Sizes of the model, the data and the optimizer. The defaults: about 1.7 MB of weights."""

    vocab: int = 64
    seq_len: int = 32
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    batch: int = 16  # sequences in the global batch, split evenly over the ranks
    lr: float = 3e-3
    weight_decay: float = 0.01
    eps: float = 1e-6  # AdamW's; see make_optimizer
    seed: int = 0
    compute_ms: float = 0.0  # > 0: emulated accelerator time, as ddp.Config's (timing only)

    def param_count(self) -> int:
        """Number of parameters."""
        return sum(p.numel() for p in make_model(self).parameters())

    def param_bytes(self) -> int:
        """Bytes of all parameters (float32)."""
        return sum(p.numel() * p.element_size() for p in make_model(self).parameters())


class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then an MLP, each residual."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyTransformer(nn.Module):
    """Embeddings, ``cfg.layers`` blocks, a final LayerNorm and a linear head (logits)."""

    def __init__(self, cfg: Config) -> None:
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
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block in self.blocks:
            x = self.compute(block(x))
        return self.head(self.ln(x))


def make_model(cfg: Config = Config(), seed: int | None = None) -> TinyTransformer:
    """The model, initialised from ``seed`` (default ``cfg.seed``) on the CPU."""
    torch.manual_seed(cfg.seed if seed is None else seed)
    return TinyTransformer(cfg)


def transitions(cfg: Config = Config()) -> torch.Tensor:
    """The Markov chain: row ``i`` is the distribution of the token after token ``i``."""
    g = torch.Generator().manual_seed(10_000 + cfg.seed)
    logits = 3.0 * torch.randn(cfg.vocab, cfg.vocab, generator=g)  # peaked rows
    return torch.softmax(logits, dim=1)


def entropy_rate(cfg: Config = Config()) -> float:
    """The chain's entropy in nats per token: the lowest mean loss any model can reach."""
    p = transitions(cfg).double()
    stationary = torch.full((cfg.vocab,), 1.0 / cfg.vocab, dtype=torch.float64)
    for _ in range(500):  # power iteration
        stationary = stationary @ p
    per_row = -(p * p.clamp_min(1e-300).log()).sum(dim=1)
    return float(stationary @ per_row)


def global_batch(step: int, cfg: Config = Config()) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets of step ``step``: ``batch × seq_len`` token ids, on the CPU."""
    g = torch.Generator().manual_seed(1000 * cfg.seed + step)
    p = transitions(cfg)
    tokens = torch.empty(cfg.batch, cfg.seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(cfg.vocab, (cfg.batch,), generator=g)
    for t in range(cfg.seq_len):
        tokens[:, t + 1] = torch.multinomial(p[tokens[:, t]], 1, generator=g).squeeze(1)
    return tokens[:, :-1], tokens[:, 1:]


def local_batch(
    step: int, rank: int, world_size: int, cfg: Config = Config()
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of :func:`global_batch` (the batch must divide evenly)."""
    if cfg.batch % world_size:
        raise ValueError(
            f"the global batch {cfg.batch} does not split evenly over {world_size} ranks: "
            f"use a batch that is a multiple of {world_size}"
        )
    x, y = global_batch(step, cfg)
    n = cfg.batch // world_size
    return x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy, a mean over every token given (so the ranks' means average to the batch's)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(params: Iterable[torch.Tensor], cfg: Config = Config()) -> torch.optim.AdamW:
    """AdamW with the config's learning rate, weight decay and eps, one parameter group.

    Why ``eps = 1e-6`` rather than torch's 1e-8: Adam moves each weight by about
    ``lr * g / (|g| + eps)``, so a gradient element near zero, whose sign float rounding
    can flip, moves its weight by up to ``lr`` either way. With 1e-8, a data-parallel run
    and one process drift apart by about 1e-5 per step on this model (rounding, not a
    bug); with 1e-6 they stay within about 1e-6, and the comparison can be tight.
    """
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.eps)


def initial_loss(cfg: Config = Config()) -> float:
    """The loss of a model that knows nothing (uniform over the vocabulary): ln(vocab)."""
    return math.log(cfg.vocab)


def baseline(steps: int, cfg: Config = Config()) -> dict[str, list]:
    """One process, rank 0's initial weights, the whole global batch: losses and final weights."""
    model = make_model(cfg)
    opt = make_optimizer(model.parameters(), cfg)
    losses = []
    for step in range(steps):
        x, y = global_batch(step, cfg)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": [p.detach().clone() for p in model.parameters()]}
