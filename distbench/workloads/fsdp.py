"""FSDP2 for any workload whose model has `.blocks` (gpt and lora: the decoder blocks; mlp: its
Linear + GELU blocks): each block is one `fully_shard` unit, the root holds the rest (embeddings and
final norm, the MLP's head). The training and memory harnesses call it inside the torchrun ranks;
it imports torch."""

from __future__ import annotations

import torch


class FSDPUnavailable(RuntimeError):
    """FSDP2 cannot run here (torch without it, or a backend/device it does not support)."""


def fully_shard_blocks(model, bfloat16: bool) -> None:
    """FSDP2: fully_shard each of `model.blocks`, then the root (what no block holds). Under bfloat16
    the gathered parameters are bf16 and gradients are reduced in fp32 (MixedPrecisionPolicy). Raises
    FSDPUnavailable with the reason where FSDP2 cannot run; an allocation failure stays what it is."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if bfloat16 else MixedPrecisionPolicy())
        for block in model.blocks:
            fully_shard(block, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    except torch.OutOfMemoryError:
        raise
    except (ImportError, NotImplementedError, TypeError, ValueError, RuntimeError) as e:
        text = str(e).strip().splitlines()
        raise FSDPUnavailable(f"{type(e).__name__}: {text[0] if text else ''}"[:300]) from e
