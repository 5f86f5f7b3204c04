"""The language-model workloads: a GPT-style decoder written here (no hub downloads, no tokenizer),
low-rank adapters for it (LoRA, no peft), and the model-FLOPs definition MFU uses.

Imported inside the torchrun ranks and by tests (it imports torch); analysis never imports it.

- `gpt`: pre-norm blocks (LayerNorm -> causal self-attention through
  torch.nn.functional.scaled_dot_product_attention -> residual; LayerNorm -> MLP 4x GELU ->
  residual), learned position embeddings, a final LayerNorm, and an output projection tied to the
  token embedding. Linear layers have no bias (as nanoGPT's bias=False option).
- `lora`: the same model with every parameter frozen and a low-rank adapter beside each attention
  and MLP projection (qkv, attention out, MLP in, MLP out): y = W x + (alpha / r) B A x, A (r x in)
  random, B (out x r) zero, so training starts from the base model and only A and B get gradients
  (DDP then syncs only them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from distbench.core.choices import GPT_SIZES
# FSDP2 per block serves any model with `.blocks` (distbench.workloads.fsdp); re-exported for the
# callers that import it from here (the memory harness, older code)
from distbench.workloads.fsdp import FSDPUnavailable, fully_shard_blocks  # noqa: F401

LORA_TARGETS = ("qkv", "attn_out", "mlp_in", "mlp_out")


@dataclass(frozen=True)
class GPTConfig:
    n_layers: int
    n_heads: int
    dim: int
    vocab_size: int
    seq_len: int

    def __post_init__(self):
        for name in ("n_layers", "n_heads", "dim", "vocab_size", "seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.dim % self.n_heads:
            raise ValueError(f"dim {self.dim} is not divisible by n_heads {self.n_heads}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def gpt_config(size: str | None, vocab_size: int, seq_len: int, layers: int | None = None,
               heads: int | None = None, dim: int | None = None) -> GPTConfig:
    """A named size, with any of layers/heads/dim overriding it (all three when size is None)."""
    if size is not None and size not in GPT_SIZES:
        raise ValueError(f"gpt size {size!r}: allowed {', '.join(GPT_SIZES)}")
    base = GPT_SIZES[size] if size else (None, None, None)
    chosen = [v if v is not None else b for v, b in zip((layers, heads, dim), base)]
    if None in chosen:
        raise ValueError("gpt: give a size or all of layers, heads and dim")
    return GPTConfig(*chosen, vocab_size=vocab_size, seq_len=seq_len)


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.attn_out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x):
        # The heads are read off the projection's width: under tensor parallel
        # (distbench.workloads.layouts) a rank's slice holds its n_heads / tp_size heads' q, k, v.
        b, t, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=2)
        width = q.shape[-1]
        q, k, v = (z.reshape(b, t, width // self.head_dim, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_out(y.transpose(1, 2).reshape(b, t, width))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.dim)
        self.mlp_in = nn.Linear(cfg.dim, 4 * cfg.dim, bias=False)
        self.mlp_out = nn.Linear(4 * cfg.dim, cfg.dim, bias=False)

    def forward(self, x):
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.ln_mlp(x))))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith(("attn_out.weight", "mlp_out.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.tok_emb.weight)  # output projection tied to the embedding


def make_gpt(cfg: GPTConfig) -> GPT:
    return GPT(cfg)


def make_tokens(batch: int, cfg: GPTConfig, rank: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One rank's data, generated once (seeded by rank) and reused every step: random token ids
    (batch, seq_len + 1) split into inputs and next-token targets."""
    g = torch.Generator(device="cpu").manual_seed(2000 + rank)
    ids = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=g)
    return ids[:, :-1].contiguous().to(device), ids[:, 1:].contiguous().to(device)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


# --- LoRA ------------------------------------------------------------------------------------

class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: y = W x + (alpha / r) B A x."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        if rank < 1:
            raise ValueError(f"lora rank must be >= 1, got {rank}")
        self.base = base
        self.base.weight.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))  # as nn.Linear's init; B = 0: starts at W
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


def apply_lora(model: GPT, rank: int, alpha: float) -> int:
    """Freeze every parameter of `model` and put an adapter beside each attention and MLP
    projection (LORA_TARGETS). Returns the number of trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.blocks:
        for owner, name in ((block.attn, "qkv"), (block.attn, "attn_out"), (block, "mlp_in"), (block, "mlp_out")):
            setattr(owner, name, LoRALinear(getattr(owner, name), rank, alpha))
    return trainable_params(model)


def lora_trainable_count(cfg: GPTConfig, rank: int) -> int:
    """Adapter parameters by hand: r x (in + out) per adapted projection, 4 per block."""
    d = cfg.dim
    per_block = rank * ((d + 3 * d) + (d + d) + (d + 4 * d) + (4 * d + d))
    return cfg.n_layers * per_block


# --- counts and FLOPs ------------------------------------------------------------------------

def trainable_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def param_counts(model: GPT) -> dict[str, int]:
    """total, trainable, and non_embedding = total - the position embedding. The token embedding
    is counted: tied to the output projection, it is the weight of a real matmul (nanoGPT's
    get_num_params does the same); the position embedding is a lookup only."""
    total = sum(p.numel() for p in model.parameters())
    return {"total": total, "trainable": trainable_params(model),
            "non_embedding": total - model.pos_emb.weight.numel()}


def flops_per_token(cfg: GPTConfig, n_params: int, n_trainable: int | None = None) -> float:
    """Model FLOPs of one training token (forward + backward), the PaLM paper's definition
    (Chowdhery et al. 2022, appendix B) as nanoGPT's estimate_mfu and torchtitan's
    get_num_flop_per_token use it: 6 N + 12 L H Q T, with N the non-embedding parameters
    (param_counts), L layers, H heads, Q head dim, T sequence length. 6 N: every weight does 2
    FLOPs per token in forward and 4 in backward (its input's and its own gradient); 12 L H Q T:
    the attention scores and their weighted sum (2 matmuls of 2 T H Q FLOPs per token and layer in
    forward, twice that in backward), counted over the whole T x T matrix, causal mask or not.

    LoRA (n_trainable given): frozen weights skip their own gradient, so they count 4 FLOPs per
    token and the adapters 6: 4 (N - n_trainable) + 6 n_trainable + 12 L H Q T (N including the
    adapters)."""
    attention = 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * cfg.seq_len
    if n_trainable is None:
        return float(6 * n_params + attention)
    return float(4 * (n_params - n_trainable) + 6 * n_trainable + attention)


# --- the registry's entry points (distbench.workloads.registry) -----------------------------

def config_from_args(a) -> GPTConfig:
    return gpt_config(a.gpt_size, a.vocab_size, a.seq_len, a.gpt_layers, a.gpt_heads, a.gpt_dim)


def check_args(a) -> None:
    """A ValueError naming what is wrong with gpt/lora's arguments."""
    config_from_args(a)
    if a.model == "lora" and a.lora_rank < 1:
        raise ValueError("--lora-rank must be >= 1")


def build(a, rank: int, device):
    """gpt, or lora (gpt frozen, with adapters), initialised on `device` (a 1.3B model is slow to
    initialise on the CPU); random token data seeded by rank."""
    from distbench.workloads.registry import Built

    cfg = config_from_args(a)
    with torch.device(device):
        model = make_gpt(cfg)
        if a.model == "lora":
            apply_lora(model, a.lora_rank, a.lora_alpha)
    return Built(model, lambda batch: make_tokens(batch, cfg, rank, device), lm_loss, param_counts(model))


def flops_per_sample(a, counts: dict) -> int:
    """flops_per_token over the sequence (LoRA: frozen weights skip their own gradient)."""
    return a.seq_len * int(flops_per_token(config_from_args(a), counts["non_embedding"],
                                           counts["trainable"] if a.model == "lora" else None))
