"""What the pipeline asks of the training family besides its plan (its manifest names each function):
the config check its schema cannot state and the jobs the quick answer runs. Torch-free.
"""

from __future__ import annotations

from distbench.core.judged import node_gpus
from distbench.launch.planning import nccl_env_label_problems, quick_world_size

# The quick answer's workload: seed 004's MLP, plain DDP: the cheapest that judges scaling.
QUICK_MODEL = "mlp"
QUICK_CONFIG = "plain"


def config_check(config: dict) -> list[str]:
    """The NCCL settings of the tuning space (each one's label names a job directory), and the 2D
    layouts of training.lm.strategies that can run at none of the world sizes the config names."""
    return (nccl_env_label_problems("training.tune_space.nccl_env", config["training"]["tune_space"]["nccl_env"])
            + layout_problems(config))


def layout_problems(config: dict) -> list[str]:
    """A 2D layout (hsdp, fsdp_tp) in training.lm.strategies that divides none of the world sizes
    the config lists (training.lm.world_sizes, else training.world_sizes, else the top-level
    world_sizes) would run nowhere: refused here, naming the key, the element and the allowed
    values. Where the sizes are `auto` (resolved on the host) or some size fits, the plan skips the
    sizes that do not fit, each with the reason (distbench.training.plan.layout_skipped); the heads
    depend on the backend's shape (lm.gpu or lm.cpu), so the plan checks them too."""
    from distbench.workloads.layouts import TWO_D, layout_problem
    from distbench.workloads.registry import workload

    tr = config["training"]
    lm = tr.get("lm") or {}
    strategies = lm.get("strategies") or []
    models = [m for m in tr.get("models") or [] if workload(m).block == "lm"]
    if not models or not any(s in TWO_D for s in strategies):
        return []
    sizes = lm.get("world_sizes", "auto")
    if sizes == "auto":
        sizes = tr.get("world_sizes") or config.get("world_sizes")
    if not isinstance(sizes, list) or not [ws for ws in sizes if ws > 1]:
        return []  # auto (resolved on the host) or one rank only: the plan says what runs
    out = []
    for i, strategy in enumerate(strategies):
        if strategy not in TWO_D:
            continue
        whys = [layout_problem(strategy, ws, lm.get("shard_size"), lm.get("tp_size"), None, m)
                for m in models for ws in sizes if ws > 1]
        if all(whys):
            out.append(f"config key training.lm.strategies[{i}] ({strategy!r}) runs at none of the world sizes "
                       f"{sorted(w for w in sizes if w > 1)}: {'; '.join(dict.fromkeys(whys))}")
    return out


def quick(config: dict, plan: dict, cores: int) -> list:
    """The training jobs of the quick answer (the manifest's quick): one workload (QUICK_MODEL, plain
    DDP) at one rank (the efficiency baseline) and at the world size the Verdict judges. On a node with
    one GPU there is no scaling to judge: one_gpu_quick instead, the question that node can answer."""
    jobs = [j for j in plan["jobs"].get("training") or [] if j.config_label == QUICK_CONFIG]
    if not jobs:
        return []
    if node_gpus(plan) == 1:
        return one_gpu_quick(jobs)
    model = QUICK_MODEL if any(j.model == QUICK_MODEL for j in jobs) else jobs[0].model
    of = [j for j in jobs if j.model == model]
    multi = sorted({j.world_size for j in of if j.world_size > 1})
    sizes = {1, quick_world_size(config, plan, of[0].backend, multi, cores)} if multi else {1}
    return [j for j in of if j.world_size in sizes]


def one_gpu_quick(jobs: list) -> list:
    """One GPU: the language model's plain DDP job at one rank on the GPU (NCCL), the first of
    LM_QUICK_ORDER the plan has: its tokens/s and MFU are what the one-GPU Verdict leads with
    (distbench.training.analysis.section.one_gpu_headlines). The MLP's jobs are left to the full run:
    they judge scaling, which one GPU has none of. [] where the plan has no language model on the GPU."""
    from distbench.workloads.registry import workload

    lm = [j for j in jobs if j.backend == "nccl" and j.world_size == 1 and workload(j.model).block == "lm"]
    lm.sort(key=lambda j: LM_QUICK_ORDER.index(j.model) if j.model in LM_QUICK_ORDER else len(LM_QUICK_ORDER))
    return lm[:1]


# The one-GPU quick answer's language model, in order of preference: full training (every parameter's
# gradient and optimizer state), the MFU that published figures report, before LoRA's.
LM_QUICK_ORDER = ("gpt", "lora")


# The language-model job the training family's GPU default time was measured with (its manifest's
# estimate_defaults: the default config's gpt 1.3b, 1024 tokens, 8 sequences per rank, 5 + 20 steps);
# tests/workflow/test_estimate_weight.py holds it to the schema's defaults.
REFERENCE_LM = {"size": "1.3b", "seq_len": 1024, "batch_size": 8, "vocab_size": 50304, "warmup_steps": 5, "steps": 20}


def _lm_work(p: dict) -> float | None:
    """FLOPs per rank of a language-model job's steps (6 N per token + attention's 12 L d T, N the
    block and head weights: distbench.workloads.gpt.flops_per_token's form, torch-free), or None where
    the params are no language model's."""
    from distbench.core.choices import GPT_SIZES

    layers, _, dim = GPT_SIZES.get(str(p.get("size")), (None, None, None))
    layers, dim = p.get("layers") or layers, p.get("dim") or dim
    try:
        seq, batch, vocab = int(p["seq_len"]), int(p["batch_size"]), int(p["vocab_size"])
        steps = int(p["warmup_steps"]) + int(p["steps"])
        layers, dim = int(layers), int(dim)
    except (KeyError, TypeError, ValueError):
        return None
    per_token = 6 * (12 * layers * dim * dim + vocab * dim) + 12 * layers * dim * seq
    return per_token * seq * batch * steps


# A compiled job's compilation (training.lm.compile), which its timed steps leave out but its wall time does
# not, added to the estimate as a constant per compiled job (its compile_time_s column measures it per run):
# - nccl: 40 s. gpt 1.3b on one H100 (benchmarks/results/training-lm-mfu-h100x1-2026-11-26): 245 s for four
#   jobs, three compiled, about 120 s beyond what the four jobs' launches (~12 s each) and steps (2 x 25 at
#   0.27-0.39 s, the eager one at 0.29 s) take: ~40 s of compiling per compiled job;
# - gloo: 36 s. The CPU default (gpt tiny, seq 64, batch 4, 5 + 20 steps) on the project's 2 cores with a cold
#   inductor cache, 2026-11-29: 54.0 s compiled against 18.0 s eager at 1 rank, compile_time_s 36.6 s.
COMPILE_S = {"nccl": 40.0, "gloo": 36.0}


def _measuring_s(backend: str, world_size: int) -> float:
    """The part of the family's default figure the estimate scales by the weight (beyond the launch's fixed
    cost: distbench.pipeline.estimate.default_seconds), for the host a backend's default is stated for (nccl:
    a GPU host, gloo: a CPU host)."""
    from distbench.training.manifest import MANIFEST

    host = "gpu" if backend == "nccl" else "cpu"
    d = MANIFEST.estimate_defaults[(host, backend)]
    seconds = d.at(world_size)
    return max(seconds - min(MANIFEST.launch_cost_s.get(host, 0.0), seconds), 1.0)


# The MLP on GPUs measures a tenth of what the default's gpt 1.3b job does: on 2x H200 with the shared
# bytecode cache its jobs took 6.5-8.1 s in all, 0.89-0.96 s of it measuring and 2.2-2.7 s setting up
# (benchmarks/results/quick-h200x2-2026-11-29, c-all-cuts-*/jobs.csv), where gpt 1.3b's took 20.0 s, 9.5 s
# and 5.2 s (benchmarks/results/one-gpu-pycache-h200x1-2026-11-29/jobs.csv). With weight 1 the quick answer
# on 2x H200 printed "about 74 s" for 39 s of jobs.
MLP_GPU_WEIGHT = 0.1


def estimate_weight(params: dict) -> float:
    """How much more (or less) a job measures than the job its family's default time was measured with:
    a language model on GPUs by its FLOPs per rank against REFERENCE_LM's (gpt 2.7b: 2.0x), the MLP on
    GPUs MLP_GPU_WEIGHT; 1 for CPU runs (their defaults hold them as they are). The estimate scales the
    default's measuring part by it, never the launch's fixed cost (distbench.pipeline.estimate). A compiled
    job (params compile: true) adds COMPILE_S, as the weight that part's length makes of it."""
    backend = str(params.get("backend", "nccl"))
    weight = 1.0
    if backend == "nccl" and str(params.get("model")) in ("gpt", "lora"):
        work, ref = _lm_work(params), _lm_work(REFERENCE_LM)
        weight = 1.0 if not work or not ref else min(max(work / ref, 0.05), 50.0)
    elif backend == "nccl" and str(params.get("model")) == "mlp":
        weight = MLP_GPU_WEIGHT
    if params.get("compile") is True and backend in COMPILE_S:
        try:
            ws = int(params.get("world_size", 1))
        except (TypeError, ValueError):
            ws = 1
        weight += COMPILE_S[backend] / _measuring_s(backend, ws)
    return weight
