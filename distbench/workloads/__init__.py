"""The models the benchmark families train (shared, so no family imports another): `mlp` (seed
004's synthetic MLP, optimizers, autocast), `gpt` (a GPT-style decoder, LoRA adapters, model
FLOPs) and `fsdp` (FSDP2 per block, for any model with `.blocks`). They import torch: only the
torchrun ranks and tests import them."""
