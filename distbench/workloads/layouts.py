"""Parallel layouts of the language models beyond DDP and FSDP: `hsdp` (FSDP2 over a 2D
DeviceMesh: shard within groups of shard_size ranks, replicate across groups) and `fsdp_tp` (tensor
parallel inside groups of tp_size ranks, as torchtitan's parallelize applies it: the fused q/k/v
projection and MLP in ColwiseParallel, attention out and MLP out RowwiseParallel; then FSDP2 over
the data-parallel mesh dim).

What a layout is (its mesh, collectives, phases, title) is its spec (distbench.core.layout_spec); this
module is its torch side, keyed by the spec's name: `SHARD` applies a sharded layout, `CHECKS` refuses
a group size it cannot run. It and the spec module are the only ones that compare layout names.

The checks (`layout_problem`) are torch-free: the config check and the planner call them. The
functions that shard import torch inside (the torchrun ranks call them).

The global batch is the same for every layout: `batch_size` sequences per rank, world_size x
batch_size per step. Tensor-parallel ranks share their batch, so under fsdp_tp each data-parallel
group of tp_size ranks takes tp_size x batch_size sequences (`dp_batch`).
"""

from __future__ import annotations

from distbench.core.layout_spec import LAYOUTS, layout

TWO_D = tuple(n for n in LAYOUTS if layout(n).group)  # the layouts with a group size (a 2D mesh)
SHARDED = tuple(n for n in LAYOUTS if layout(n).sharded)  # FSDP2 under these
TP_SIZES = (2, 4)


def _hsdp_problem(world_size: int, shard_size: int | None, tp_size: int | None, heads: int | None,
                  model: str | None) -> str | None:
    allowed = [d for d in range(1, world_size + 1) if world_size % d == 0]
    if not shard_size or world_size % shard_size:
        return (f"training.lm.shard_size {shard_size} does not divide the world size {world_size} "
                f"(hsdp shards within groups of shard_size ranks): allowed {allowed}")
    return None


def _fsdp_tp_problem(world_size: int, shard_size: int | None, tp_size: int | None, heads: int | None,
                     model: str | None) -> str | None:
    if model == "lora":
        return ("tensor parallel shards the nn.Linear projections, and lora wraps each in an adapter module: "
                "fsdp_tp runs gpt only")
    if tp_size not in TP_SIZES:
        return f"training.lm.tp_size {tp_size}: allowed {list(TP_SIZES)}"
    if world_size % tp_size:
        allowed = [t for t in TP_SIZES if world_size % t == 0]
        return (f"training.lm.tp_size {tp_size} does not divide the world size {world_size} "
                f"(fsdp_tp runs tensor parallel inside groups of tp_size ranks): allowed {allowed or f'none at world size {world_size}'}")
    if heads and heads % tp_size:
        return (f"training.lm.tp_size {tp_size} does not divide the model's {heads} attention heads "
                f"(each TP rank holds whole heads): allowed {[t for t in TP_SIZES if heads % t == 0] or 'none'}")
    return None


# A layout's own check of its group size (beyond the spec's minimum world size), by name
CHECKS = {"hsdp": _hsdp_problem, "fsdp_tp": _fsdp_tp_problem}


def layout_problem(strategy: str, world_size: int, shard_size: int | None = None, tp_size: int | None = None,
                   heads: int | None = None, model: str | None = None) -> str | None:
    """Why `strategy` cannot run at `world_size` (None: it can), naming the key and its allowed values."""
    spec = layout(strategy)
    if world_size < spec.min_world_size:
        return f"{strategy} is a 2D layout: it needs at least 2 ranks (plain DDP on one rank is its baseline)"
    check = CHECKS.get(strategy)
    return check(world_size, shard_size, tp_size, heads, model) if check else None


def dp_batch(strategy: str, batch_size: int, tp_size: int | None) -> int:
    """Sequences per data-parallel group (what one rank's data holds): tp_size x batch_size under
    tensor parallel (its TP ranks share the batch), batch_size otherwise; the global batch stays
    batch_size x world_size."""
    return batch_size * tp_size if layout(strategy).tensor_parallel and tp_size else batch_size


def data_rank(strategy: str, rank: int, tp_size: int | None) -> int:
    """The rank whose data this rank reads: TP ranks of one group (adjacent ranks: the mesh is
    (dp, tp) with tp innermost) read the same sequences."""
    return rank // tp_size if layout(strategy).tensor_parallel and tp_size else rank


# --- the ranks' side (imports torch) ---------------------------------------------------------

def _mp_policy(bfloat16: bool):
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if bfloat16 else MixedPrecisionPolicy())


def _shard_blocks(model, mesh, bfloat16: bool) -> None:
    from torch.distributed.fsdp import fully_shard

    mp = _mp_policy(bfloat16)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)


def _fsdp(model, bfloat16, world_size, device_type, shard_size, tp_size) -> None:
    from distbench.workloads.fsdp import fully_shard_blocks

    fully_shard_blocks(model, bfloat16)


def _hsdp(model, bfloat16, world_size, device_type, shard_size, tp_size) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, (world_size // shard_size, shard_size), mesh_dim_names=("replicate", "shard"))
    _shard_blocks(model, mesh, bfloat16)


def _fsdp_tp(model, bfloat16, world_size, device_type, shard_size, tp_size) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh2d = init_device_mesh(device_type, (world_size // tp_size, tp_size), mesh_dim_names=("dp", "tp"))
    tensor_parallel(model, mesh2d["tp"])
    _shard_blocks(model, mesh2d["dp"], bfloat16)


# Each sharded layout's torch side, by name: (model, bfloat16, world_size, device_type, shard_size, tp_size)
SHARD = {
    "fsdp": _fsdp,
    "hsdp": _hsdp,
    "fsdp_tp": _fsdp_tp,
}


def shard_layout(model, strategy: str, bfloat16: bool, world_size: int, device_type: str,
                 shard_size: int | None = None, tp_size: int | None = None) -> None:
    """Apply the sharded layout `strategy` (SHARD) to `model` (gpt: `.blocks` of distbench.workloads.gpt.Block).
    Raises distbench.workloads.fsdp.FSDPUnavailable with the reason where it cannot run here."""
    import torch

    from distbench.workloads.fsdp import FSDPUnavailable

    try:
        SHARD[strategy](model, bfloat16, world_size, device_type, shard_size, tp_size)
    except (torch.OutOfMemoryError, FSDPUnavailable):  # FSDPUnavailable: already says why
        raise
    except (ImportError, NotImplementedError, TypeError, ValueError, RuntimeError, AssertionError) as e:
        text = str(e).strip().splitlines()
        raise FSDPUnavailable(f"{type(e).__name__}: {text[0] if text else ''}"[:300]) from e


def tensor_parallel(model, tp_mesh) -> None:
    """torchtitan's plan for a decoder block, on gpt's module names: the fused q/k/v projection
    (attn.qkv) and the MLP's first projection (mlp_in) ColwiseParallel, attention out and MLP out
    RowwiseParallel. Each TP rank then holds n_heads / tp_size whole heads: its slice of the fused
    projection's output is read as its heads' q, k and v (gpt.Attention reads the head count off
    the width it gets), a permutation of the random initial weights."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"attn.qkv": ColwiseParallel(), "attn.attn_out": RowwiseParallel(),
            "mlp_in": ColwiseParallel(), "mlp_out": RowwiseParallel()}
    for block in model.blocks:
        parallelize_module(block, tp_mesh, plan)
