"""The model arguments both training and memory harnesses take, read from the workload registry
(distbench.workloads.registry; no torch at import: a workload's check imports its module)."""

from __future__ import annotations

import argparse

from distbench.core.choices import STRATEGIES
from distbench.workloads.registry import WORKLOADS, all_args, load_extensions, workload


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--model, --strategy and every workload's own arguments (each flag once)."""
    load_extensions()
    p.add_argument("--model", choices=tuple(WORKLOADS), default="mlp",
                   help="; ".join(f"{s.name}: {s.doc or s.title}" for s in WORKLOADS.values()))
    p.add_argument("--strategy", choices=STRATEGIES, default="ddp",
                   help="fsdp: FSDP2 fully_shard per block (" + ", ".join(s.name for s in WORKLOADS.values() if s.fsdp) + ")")
    for arg in all_args():
        users = [s.name for s in WORKLOADS.values() if arg in s.args]
        p.add_argument(arg.flag, type=arg.type, default=arg.default, choices=arg.choices,
                       help=f"{'/'.join(users)}: {arg.help}" if arg.help else "/".join(users))


def resolve_model_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Check the workload's arguments (p.error on a bad one) and set `a.shape`: its shape columns
    (registry.SHAPE_COLUMNS), so rows and log lines name the model's real shape."""
    spec = workload(a.model)
    if a.strategy == "fsdp" and not spec.fsdp:
        p.error(f"--strategy fsdp needs --model {' or '.join(s.name for s in WORKLOADS.values() if s.fsdp)}")
    try:
        spec.check(a)
    except ValueError as e:
        p.error(str(e))
    a.shape = spec.shape(a)
