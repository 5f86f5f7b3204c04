"""A workload added the way a new one is: its model module plus one registration, here at import
(DISTBENCH_WORKLOAD_MODULES=tests.helpers.conv_workload makes every torchrun rank import it).
A 1-layer convolution on random 8x8 images with a linear classification head."""

from distbench.workloads.registry import Arg, Built, WorkloadSpec, register

CLASSES = 10


def shape(a) -> dict:
    return {"hidden_dim": a.conv_channels, "num_layers": 1, "n_heads": None, "seq_len": None,
            "vocab_size": None, "lora_rank": None}


def check(a) -> None:
    if a.conv_channels < 1 or a.image_size < 1:
        raise ValueError("--conv-channels and --image-size must be >= 1")


def build(a, rank, device):
    import torch
    from torch import nn

    c, s = a.conv_channels, a.image_size
    model = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GELU(), nn.Flatten(), nn.Linear(c * s * s, CLASSES)).to(device)
    g = torch.Generator().manual_seed(3000 + rank)

    def data(batch):
        return (torch.randn(batch, c, s, s, generator=g).to(device),
                torch.randint(0, CLASSES, (batch,), generator=g).to(device))

    n = sum(p.numel() for p in model.parameters())
    return Built(model, data, torch.nn.functional.cross_entropy, {"total": n, "trainable": n})


def flops_per_sample(a, counts) -> int:
    """Forward 2 FLOPs per multiply-add, backward twice that: the conv's weights act at every pixel."""
    c, s = a.conv_channels, a.image_size
    return 6 * (c * c * 9 * s * s + c * s * s * CLASSES)


SPEC = WorkloadSpec("conv", "1-layer conv", (Arg("--conv-channels", "channels", default=4, help="channels"),
                                              Arg("--image-size", "image_size", default=8, help="image side")),
                    build, flops_per_sample, shape, check)
register(SPEC)
