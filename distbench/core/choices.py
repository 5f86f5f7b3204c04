"""Every allowed-value list of the project, written once (no torch import: the config check and
the Snakefile read these before any job starts).

`tests/core/test_choices.py` ties them to the places that must repeat them: the JSON schema that
Snakemake validates against, the harness's command line, the rules' wildcard constraints and the
README. The ops are not here: each collective is one spec in distbench.core.ops_spec (its own module's
docstring says how to add one).
"""

from __future__ import annotations

BACKENDS = ("nccl", "gloo")
# all_to_all_v's traffic matrices: uniform, zipf:S (MoE routing skew), file:PATH
TRAFFIC_KINDS = ("uniform", "zipf", "file")
DTYPES = ("float32", "bfloat16", "float16", "float64", "int32")
# events: CUDA events around back-to-back ops; graph: CUDA-graph replay; host: host clock around
# each op plus a device sync. Gloo (CPU) only has `host`.
# How nccl-tests names our dtypes in its table and -J output (its per-op redop and root are in
# distbench.core.ops_spec).
NCCL_TESTS_TYPES = {"float32": "float", "bfloat16": "bfloat16", "float16": "half", "float64": "double", "int32": "int32"}
TIMINGS = ("events", "graph", "host")
DEVICE_TIMINGS = ("events", "graph")
# How one trial's per-rank times become the row's `time_us` (nccl-tests' -a: 0 rank 0, 1 avg, 2 min, 3 max).
RANK_AGGS = ("max", "avg", "min", "rank0")
# skipped: not applicable by design (e.g. send_recv at 1 rank); not_run: not reached because the
# job ended early (its point in progress is `failed`, with the reason); hung: the point in progress
# when the job outlived its time limit and its ranks had stopped completing collectives (the
# rank that stopped is named: distbench.launch.progress, distbench.launch.hang); timeout: the point
# in progress when the job outlived its time limit while its ranks were still completing work
# (slow, not hung: a longer job_timeout_s or fewer steps would finish it).
STATUSES = ("ok", "oom", "skipped", "not_run", "failed", "hung", "timeout", "wrong")
# Worst first: a point's (or a job's) status is the worst over its rows.
STATUS_SEVERITY = {s: i for i, s in enumerate(("wrong", "hung", "failed", "timeout", "oom", "not_run", "skipped", "ok"))}

# Training a model (the families that train one: their jobs' DDP communication hook, dtype, ...).
DDP_HOOKS = ("none", "bf16_compress", "fp16_compress")
MODEL_DTYPES = ("float32", "bfloat16")
OPTIMIZERS = ("sgd", "sgd_momentum", "adamw")
SCALINGS = ("weak", "strong")
LAUNCHERS = ("auto", "local", "srun", "ssh")  # how a multi-node job starts its torchrun agents (distbench.launch.cluster)
STRATEGIES = ("ddp", "fsdp")  # fsdp: FSDP2 fully_shard per block (workloads with fsdp=True: gpt, lora)
# The workloads' names: distbench.workloads.registry.WORKLOADS (the one list).
# gpt/lora sizes by name: (layers, heads, model dim), the GPT-3 paper's (Brown et al. 2020, table
# 2.1), and a tiny one for CPU tests.
GPT_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 2, 64),
    "125m": (12, 12, 768),
    "350m": (24, 16, 1024),
    "760m": (24, 16, 1536),
    "1.3b": (24, 32, 2048),
    "2.7b": (32, 32, 2560),  # GPT-3 2.7B (Brown et al. 2020, table 2.1): above the default 1.3b, to compare layouts on
}

BACKEND_NAMES = {"nccl": "NCCL", "gloo": "Gloo", "mpi": "MPI", "ucc": "UCC"}  # as people write them


def backend_name(b: str) -> str:
    """A backend as the report writes it: NCCL, Gloo (an unknown one upper-cased)."""
    return BACKEND_NAMES.get(str(b), str(b).upper())
