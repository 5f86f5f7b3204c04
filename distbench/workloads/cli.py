"""The model arguments both training and memory harnesses take, read from the workload registry
(distbench.workloads.registry; no torch at import: a workload's check imports its module)."""

from __future__ import annotations

import argparse
import os

from distbench.core.choices import STRATEGIES
from distbench.core.layout_spec import layout
from distbench.workloads.layouts import layout_problem
from distbench.workloads.registry import WORKLOADS, all_args, load_extensions, workload


def add_model_args(p: argparse.ArgumentParser, strategies: tuple[str, ...] = STRATEGIES) -> None:
    """--model, --strategy (ddp and fsdp; the training harness: every layout, LAYOUTS) and every
    workload's own arguments (each flag once)."""
    load_extensions()
    p.add_argument("--model", choices=tuple(WORKLOADS), default="mlp",
                   help="; ".join(f"{s.name}: {s.doc or s.title}" for s in WORKLOADS.values()))
    p.add_argument("--strategy", choices=strategies, default="ddp",
                   help="fsdp: FSDP2 fully_shard per block (" + ", ".join(s.name for s in WORKLOADS.values() if s.fsdp) + "); "
                        "hsdp: FSDP2 over a (replicate, shard) mesh, --shard-size ranks per shard group; fsdp_tp: "
                        "tensor parallel in groups of --tp-size ranks, FSDP2 across them (gpt: distbench.workloads.layouts)")
    p.add_argument("--shard-size", type=int, help="hsdp: ranks per shard group (it divides the world size)")
    p.add_argument("--tp-size", type=int, help="fsdp_tp: ranks per tensor-parallel group (2 or 4; divides the world size and the heads)")
    for arg in all_args():
        users = [s.name for s in WORKLOADS.values() if arg in s.args]
        p.add_argument(arg.flag, type=arg.type, default=arg.default, choices=arg.choices,
                       help=f"{'/'.join(users)}: {arg.help}" if arg.help else "/".join(users))


def resolve_model_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Check the workload's arguments (p.error on a bad one) and set `a.shape`: its shape columns
    (registry.SHAPE_COLUMNS), so rows and log lines name the model's real shape."""
    spec = workload(a.model)
    lay = layout(a.strategy)
    if lay.sharded and not spec.fsdp:
        p.error(f"--strategy {a.strategy} needs --model {' or '.join(s.name for s in WORKLOADS.values() if s.fsdp)}")
    try:
        spec.check(a)
    except ValueError as e:
        p.error(str(e))
    a.shape = spec.shape(a)
    if lay.group:
        if lay.tensor_parallel and not spec.attention:
            p.error(f"--strategy {a.strategy} needs a model with attention blocks (gpt)")
        why = layout_problem(a.strategy, int(os.environ.get("WORLD_SIZE", "1")), getattr(a, "shard_size", None),
                             getattr(a, "tp_size", None), a.shape.get("n_heads"), a.model)
        if why:
            p.error(why.replace("training.lm.shard_size", "--shard-size").replace("training.lm.tp_size", "--tp-size"))
