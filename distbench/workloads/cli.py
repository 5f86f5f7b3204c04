"""The model arguments both training and memory harnesses take (no torch at import: gpt is
imported only to resolve a size)."""

from __future__ import annotations

import argparse

from distbench.core.choices import GPT_SIZES, STRATEGIES, TRAINING_MODELS


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=TRAINING_MODELS, default="mlp",
                   help="mlp (seed 004), gpt (distbench.workloads.gpt), lora (gpt, frozen, with adapters)")
    p.add_argument("--strategy", choices=STRATEGIES, default="ddp", help="fsdp: FSDP2 fully_shard per block (gpt, lora)")
    p.add_argument("--hidden-dim", type=int, default=256, help="mlp width")
    p.add_argument("--num-layers", type=int, default=2, help="mlp depth")
    p.add_argument("--gpt-size", choices=GPT_SIZES, help="gpt/lora: a named size (layers, heads, dim)")
    p.add_argument("--gpt-layers", type=int, help="gpt/lora: layers (overrides the size's)")
    p.add_argument("--gpt-heads", type=int, help="gpt/lora: attention heads (overrides the size's)")
    p.add_argument("--gpt-dim", type=int, help="gpt/lora: model width (overrides the size's)")
    p.add_argument("--seq-len", type=int, default=64, help="gpt/lora: tokens per sample")
    p.add_argument("--vocab-size", type=int, default=512, help="gpt/lora: vocabulary of the random tokens")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32.0)


def resolve_model_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Check the model arguments (p.error on a bad one) and fill hidden_dim / num_layers /
    gpt_heads from a gpt size, so rows name the model's real shape."""
    if a.hidden_dim < 1 or a.num_layers < 1:
        p.error("--hidden-dim and --num-layers must be >= 1")
    if a.model == "mlp":
        if a.strategy != "ddp":
            p.error("--strategy fsdp needs --model gpt or lora")
        return
    from distbench.workloads.gpt import gpt_config

    try:
        cfg = gpt_config(a.gpt_size, a.vocab_size, a.seq_len, a.gpt_layers, a.gpt_heads, a.gpt_dim)
    except ValueError as e:
        p.error(str(e))
    a.num_layers, a.gpt_heads, a.hidden_dim = cfg.n_layers, cfg.n_heads, cfg.dim
    if a.lora_rank < 1:
        p.error("--lora-rank must be >= 1")


def lm_shape(params: dict) -> tuple[int, int, int]:
    """(layers, heads, dim) of a gpt/lora job's params (distbench.pipeline.plan): the named size with any
    layers/heads/dim override (for the failure rows a launcher writes without running the model)."""
    base = GPT_SIZES.get(params.get("size") or "", (None, None, None))
    return tuple(params.get(k) if params.get(k) is not None else b for k, b in zip(("layers", "heads", "dim"), base))
