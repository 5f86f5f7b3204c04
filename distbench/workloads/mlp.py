"""Seed 004's synthetic MLP on random data (its Linear + GELU pairs are the `.blocks` FSDP2 shards:
distbench.workloads.fsdp), and what a step needs (optimizer, autocast), for the training and memory
families. Imported inside the torchrun ranks and tests only (it imports torch)."""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.nn import functional as F

from distbench.core.choices import OPTIMIZERS

MODEL_NAME = "mlp"
LR = 1e-3


def n_classes(hidden_dim: int) -> int:
    """Width of the classification head: hidden_dim // 4, at least 16."""
    return max(16, hidden_dim // 4)


class LinearGELU(nn.Linear):
    """One MLP block: Linear(hidden, hidden) then GELU, in one module so that FSDP2 shards the pair
    as one unit. An nn.Linear (the same parameters, initialised the same way) whose forward adds
    the GELU: the math of nn.Sequential(Linear, GELU)."""

    def forward(self, x):
        return F.gelu(super().forward(x))


class MLP(nn.Sequential):
    """The blocks (LinearGELU) then the Linear head, as children 0..n: `model[0]` is the first
    layer, `model[-1]` the head. `blocks`: what FSDP2 shards one by one (the head stays on the root),
    as gpt's `.blocks` (distbench.workloads.fsdp.fully_shard_blocks)."""

    @property
    def blocks(self) -> list[nn.Module]:
        return list(self)[:-1]


def make_mlp(hidden_dim: int, num_layers: int) -> MLP:
    """`num_layers` Linear(hidden, hidden) + GELU blocks (GELU after every one, the last included),
    then a Linear(hidden, n_classes) head. Parameters in float32 (autocast does any lower precision),
    created in that order from torch's default generator: the same values as the flat
    nn.Sequential(Linear, GELU, ..., Linear) this was, for the same seed."""
    if hidden_dim < 1 or num_layers < 1:
        raise ValueError(f"hidden_dim and num_layers must be >= 1, got {hidden_dim}, {num_layers}")
    blocks = [LinearGELU(hidden_dim, hidden_dim) for _ in range(num_layers)]
    return MLP(*blocks, nn.Linear(hidden_dim, n_classes(hidden_dim)))


def build(a, rank: int, device):
    """The registry's entry point (distbench.workloads.registry): the MLP of --hidden-dim and
    --num-layers, built on the CPU then moved (the seeded CPU generator: the same weights on
    every device), its random data and cross-entropy loss."""
    from distbench.workloads.registry import Built

    model = make_mlp(a.hidden_dim, a.num_layers).to(device)
    n = sum(p.numel() for p in model.parameters())
    return Built(model, lambda batch: make_batch(batch, a.hidden_dim, rank, device),
                 torch.nn.functional.cross_entropy, {"total": n, "trainable": n})


def make_batch(batch: int, hidden_dim: int, rank: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One rank's data, generated once (seeded by rank) and reused every step: random float32
    inputs (batch, hidden_dim) and random integer labels."""
    g = torch.Generator(device="cpu").manual_seed(1000 + rank)
    x = torch.randn(batch, hidden_dim, generator=g)
    y = torch.randint(0, n_classes(hidden_dim), (batch,), generator=g)
    return x.to(device), y.to(device)


def make_optimizer(name: str, params, fused: bool = False) -> torch.optim.Optimizer:
    """SGD (torch's default implementation), or AdamW; fused=True (GPU) takes AdamW's fused CUDA
    kernel, as the plain-torch MFU reference did."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=LR, momentum=0.0)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=LR, momentum=0.9)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LR, fused=True) if fused else torch.optim.AdamW(params, lr=LR)
    raise ValueError(f"optimizer {name!r}: allowed {', '.join(OPTIMIZERS)}")


def autocast(dtype: str, device):
    """float32: no autocast; bfloat16: torch.autocast on the device's type (cuda or cpu)."""
    if dtype == "float32":
        return contextlib.nullcontext()
    if dtype == "bfloat16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"dtype {dtype!r}: allowed float32, bfloat16")


def grad_param_bytes(model: nn.Module) -> list[int]:
    """Bytes of each gradient DDP syncs (requires_grad parameters, in parameter order). The
    parameters are float32 even under autocast, so their gradients are too."""
    return [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]
