"""Every training workload, one `WorkloadSpec` each, in `WORKLOADS` (no torch at import: the config
check, the planner and the Snakefile read the names; the model modules are imported only by the
spec's functions, inside the torchrun ranks).

A new workload is its model module (a `build(args, rank, device) -> Built` function, torch
imported there) plus one line in WORKLOADS. The training and memory harnesses, their jobs' command
values (`workload_values`) and their failure rows (`workload_shape`) read it from here only.

Extension point without editing this file: DISTBENCH_WORKLOAD_MODULES, a comma-separated list of
importable modules that each call `register(spec)` at import. The harnesses import them before
parsing their arguments (`load_extensions`); an environment variable reaches every torchrun rank
(and a pipeline job through config `job_env`, with job_env_allow_loader_vars: true: it makes every
rank import code, so distbench.pipeline.config.LOADER_VARS holds it), where a registration made in
the launching process would not.
"""

from __future__ import annotations

import argparse
import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from distbench.core.choices import GPT_SIZES

EXTENSIONS_ENV = "DISTBENCH_WORKLOAD_MODULES"
BLOCKS = ("ddp", "lm")  # the config blocks a workload's jobs read (WorkloadSpec.block)
SHAPE_COLUMNS = ("hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size", "lora_rank")


@dataclass(frozen=True)
class Arg:
    """One command-line argument a workload adds. `param`: the key of the plan's job params that
    sets it (distbench.pipeline.plan), None when the plan never sets it."""
    flag: str
    param: str | None = None
    type: Callable = int
    default: Any = None
    help: str = ""
    choices: tuple | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass
class Built:
    """A workload built on one rank (by its spec's `build`): the module, its data and loss."""
    model: Any  # torch.nn.Module, float32 parameters, on the rank's device
    data: Callable[[int], tuple]  # per-rank batch -> (inputs, targets), seeded by rank, on the device
    loss_fn: Callable  # (outputs, targets) -> scalar loss
    counts: dict[str, int]  # total and trainable parameters (gpt adds non_embedding)


def even_split(scaling: str, batch_size: int, global_batch_size: int | None, world_size: int) -> tuple[int, int]:
    """(per-rank batch, global batch). weak: per-rank fixed; strong: global fixed, split evenly."""
    if scaling == "weak":
        return batch_size, batch_size * world_size
    if global_batch_size is None:
        raise ValueError("--scaling strong needs --global-batch-size")
    if global_batch_size % world_size:
        raise ValueError(f"--global-batch-size {global_batch_size} is not divisible by the world size {world_size}")
    return global_batch_size // world_size, global_batch_size


@dataclass(frozen=True)
class WorkloadSpec:
    name: str  # the --model value and the CSV's `model`
    title: str  # as the report and the log write it
    args: tuple[Arg, ...]  # the arguments it reads (shared ones, e.g. gpt/lora's, are added once)
    build: Callable[[argparse.Namespace, int, Any], Built]  # (args, rank, device); imports torch
    flops_per_sample: Callable[[argparse.Namespace, dict], int]  # (args, Built.counts): forward + backward
    shape: Callable[[argparse.Namespace], dict]  # SHAPE_COLUMNS' values, from the (unchecked) args
    check: Callable[[argparse.Namespace], None] = lambda a: None  # raises ValueError on a bad shape
    per_rank_batch: Callable[[str, int, int | None, int], tuple[int, int]] = even_split
    fsdp: bool = False  # FSDP2 per block: the model has `.blocks` (distbench.workloads.fsdp.fully_shard_blocks)
    attention: bool = False  # the model's blocks hold `.attn` (the training rows name its SDPA kernel)
    # Which config block shapes its jobs (distbench.training.plan, distbench.memory.plan): "ddp" reads
    # training.gpu/cpu (its Args' params), training.strategies (FSDP jobs where fsdp is true), the DDP
    # knobs, tuning, scaling and memory.*.mlp_batch_sizes;
    # "lm" reads training.lm (gpu/cpu shape, strategies, optimizer, any top-level key an Arg names,
    # e.g. lora_rank) and memory.*.lm_batch_sizes.
    block: str = "ddp"
    doc: str = field(default="", compare=False)

    def __post_init__(self):
        if self.block not in BLOCKS:
            raise ValueError(f"workload {self.name!r}: block {self.block!r} is not one of {BLOCKS}")

    def tokens_per_sample(self, a: argparse.Namespace) -> int | None:
        """Tokens in one sample (a language model's sequence length; None: not a token model)."""
        return self.shape(a)["seq_len"]


# --- the built-in workloads ------------------------------------------------------------------

def _lazy(module: str, name: str) -> Callable:
    """A function of a model module, imported on first call (the module imports torch)."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    return call


MLP_ARGS = (Arg("--hidden-dim", "hidden_dim", default=256, help="mlp width"),
            Arg("--num-layers", "num_layers", default=2, help="mlp depth"))
# gpt and lora share these; order = the order the jobs pass them in
LM_ARGS = (Arg("--seq-len", "seq_len", default=64, help="tokens per sample"),
           Arg("--vocab-size", "vocab_size", default=512, help="vocabulary of the random tokens"),
           Arg("--gpt-size", "size", type=str, choices=tuple(GPT_SIZES), help="a named size (layers, heads, dim)"),
           Arg("--gpt-layers", "layers", help="layers (overrides the size's)"),
           Arg("--gpt-heads", "heads", help="attention heads (overrides the size's)"),
           Arg("--gpt-dim", "dim", help="model width (overrides the size's)"))
LORA_ARGS = (Arg("--lora-rank", "lora_rank", default=16, help="adapter rank"),
             Arg("--lora-alpha", "lora_alpha", type=float, default=32.0, help="adapter scale numerator"))


def _mlp_shape(a) -> dict:
    return {"hidden_dim": a.hidden_dim, "num_layers": a.num_layers, "n_heads": None, "seq_len": None,
            "vocab_size": None, "lora_rank": None}


def _mlp_check(a) -> None:
    if a.hidden_dim < 1 or a.num_layers < 1:
        raise ValueError("--hidden-dim and --num-layers must be >= 1")


def _lm_shape(a) -> dict:
    """The named size with any layers/heads/dim override (not checked: failure rows use it too)."""
    base = GPT_SIZES.get(a.gpt_size or "", (None, None, None))
    layers, heads, dim = (v if v is not None else b for v, b in zip((a.gpt_layers, a.gpt_heads, a.gpt_dim), base))
    return {"hidden_dim": dim, "num_layers": layers, "n_heads": heads, "seq_len": a.seq_len,
            "vocab_size": a.vocab_size, "lora_rank": getattr(a, "lora_rank", None) if a.model == "lora" else None}


def _lm_spec(name: str, title: str, extra: tuple[Arg, ...] = (), doc: str = "") -> WorkloadSpec:
    gpt = "distbench.workloads.gpt"
    return WorkloadSpec(name, title, LM_ARGS + extra, _lazy(gpt, "build"), _lazy(gpt, "flops_per_sample"), _lm_shape,
                        _lazy(gpt, "check_args"), fsdp=True, attention=True, block="lm", doc=doc)


WORKLOADS: dict[str, WorkloadSpec] = {
    # mlp's FLOPs: 6 per weight per sample (2 forward, 4 backward), as gpt.flops_per_token's 6 N
    "mlp": WorkloadSpec("mlp", "MLP", MLP_ARGS, _lazy("distbench.workloads.mlp", "build"),
                        lambda a, counts: 6 * counts["total"], _mlp_shape, _mlp_check, fsdp=True,
                        doc="seed 004's MLP"),
    "gpt": _lm_spec("gpt", "GPT", doc="the GPT decoder (distbench.workloads.gpt)"),
    "lora": _lm_spec("lora", "GPT + LoRA", LORA_ARGS, doc="gpt, frozen, with low-rank adapters"),
}


def register(spec: WorkloadSpec) -> None:
    """Add a workload at run time (an extension module's import, or a test)."""
    WORKLOADS[spec.name] = spec


def load_extensions() -> None:
    """Import the modules DISTBENCH_WORKLOAD_MODULES names (each registers its workloads)."""
    for module in filter(None, (m.strip() for m in os.environ.get(EXTENSIONS_ENV, "").split(","))):
        importlib.import_module(module)


def workload(name: str) -> WorkloadSpec:
    if name not in WORKLOADS:
        load_extensions()
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"workload {name!r}: allowed {', '.join(WORKLOADS)}") from None


def all_args() -> list[Arg]:
    """Every workload's arguments, each flag once (gpt and lora share theirs), in registry order."""
    seen: dict[str, Arg] = {}
    for spec in WORKLOADS.values():
        for arg in spec.args:
            seen.setdefault(arg.flag, arg)
    return list(seen.values())


def workload_values(model: str, params: dict) -> list[tuple[str, object]]:
    """A workload's shape arguments for the harness, from a job's params (the plan's keys), as (flag,
    value) pairs (distbench.launch.job_values: flags for people, set as they are from job.json)."""
    return [(arg.flag, params[arg.param]) for arg in workload(model).args
            if arg.param and params.get(arg.param) is not None]


def namespace_from_params(model: str, params: dict) -> argparse.Namespace:
    """The parsed arguments a job's params amount to (defaults where the params say nothing)."""
    ns = argparse.Namespace(model=model, **{a.dest: a.default for a in all_args()})
    for arg in workload(model).args:
        if arg.param and params.get(arg.param) is not None:
            setattr(ns, arg.dest, params[arg.param])
    return ns


def workload_shape(model: str, params: dict) -> dict:
    """SHAPE_COLUMNS of a job from its params: for the failure rows a launcher writes without
    running the model (the same function the harness's rows use)."""
    return workload(model).shape(namespace_from_params(model, params))
