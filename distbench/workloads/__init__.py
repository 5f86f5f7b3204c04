"""The models the benchmark families train (shared, so no family imports another), behind one
registry (`registry`: a WorkloadSpec per workload, torch-free): `mlp` (seed 004's synthetic MLP,
optimizers, autocast), `gpt` (a GPT-style decoder, LoRA adapters, model FLOPs), `fsdp` (FSDP2 per
block, for any model with `.blocks`) and `cli` (the model arguments both the training and the memory
harness take). The models import torch: only the torchrun ranks and tests import them."""
