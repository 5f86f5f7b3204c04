"""Seed 004's synthetic MLP on random data, and what a step needs (optimizer, autocast), for the
training and memory families. Imported inside the torchrun ranks and tests only (it imports torch)."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from distbench.core.choices import OPTIMIZERS

MODEL_NAME = "mlp"
LR = 1e-3


def n_classes(hidden_dim: int) -> int:
    """Width of the classification head: hidden_dim // 4, at least 16."""
    return max(16, hidden_dim // 4)


def make_mlp(hidden_dim: int, num_layers: int) -> nn.Sequential:
    """`num_layers` Linear(hidden, hidden) with GELU between (and after the last), then a
    Linear(hidden, n_classes) head. Parameters in float32 (autocast does any lower precision)."""
    if hidden_dim < 1 or num_layers < 1:
        raise ValueError(f"hidden_dim and num_layers must be >= 1, got {hidden_dim}, {num_layers}")
    layers: list[nn.Module] = []
    for _ in range(num_layers):
        layers += [nn.Linear(hidden_dim, hidden_dim), nn.GELU()]
    layers.append(nn.Linear(hidden_dim, n_classes(hidden_dim)))
    return nn.Sequential(*layers)


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
