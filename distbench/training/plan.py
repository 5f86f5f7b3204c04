"""The training family's jobs and their params (torch-free: the Snakefile plans without torch)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from distbench.core.choices import GPT_SIZES
from distbench.core.layout_spec import BASELINE, layout
from distbench.core.manifest import FamilyPlan
from distbench.launch.planning import family_backend, nccl_env_label, placeable, profile_params, world_sizes
from distbench.training.contract import COMPILE_SUFFIX
from distbench.workloads.layouts import layout_problem
from distbench.workloads.registry import workload

DDP_DEFAULTS = {"bucket_cap_mb": 25, "gradient_as_bucket_view": False, "static_graph": False,
                "broadcast_buffers": True, "comm_hook": "none", "grad_accum": 1}
_DDP_SHORT = {"bucket_cap_mb": "bucket", "gradient_as_bucket_view": "gbv", "static_graph": "static",
              "broadcast_buffers": "bcast", "comm_hook": "hook", "grad_accum": "accum"}


@dataclass(frozen=True)
class TrainingJob:
    backend: str
    world_size: int
    config_label: str  # 'plain' = DDP's defaults; else the knobs that differ, e.g. 'bucket=100+hook=bf16_compress'
    ddp: dict = field(hash=False, compare=False)
    nccl_env: dict = field(hash=False, compare=False)
    model: str = "mlp"  # a workload of distbench.workloads.registry
    strategy: str = BASELINE  # ddp, fsdp (a workload with fsdp=True), hsdp or fsdp_tp (lm: the config label is the strategy)
    compile: bool = False  # training.lm.compile: under torch.compile (the config label ends in COMPILE_SUFFIX)

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "model": self.model, "world_size": self.world_size, "config": self.config_label}


PLAIN_LABEL = "plain"


def compile_values(lm: dict) -> list[bool]:
    """training.lm.compile as the plan's dimension: a boolean is that one value (the key's form before it
    was a dimension), a list its values, eager first. The schema admits booleans only: the string
    "false" never reaches here (it would be true)."""
    chosen = lm.get("compile", False)
    values = chosen if isinstance(chosen, list) else [chosen]
    return [v for v in (False, True) if v in values]


def lm_label(strategy: str, compiled: bool) -> str:
    """A language-model job's config label: its layout ('plain' for DDP), COMPILE_SUFFIX when compiled."""
    return (PLAIN_LABEL if layout(strategy).baseline else strategy) + (COMPILE_SUFFIX if compiled else "")


def ddp_label(ddp: dict, nccl_env: dict) -> str:
    """A readable, path-safe name for a DDP configuration: only what differs from DDP's defaults."""
    parts = []
    for key, default in DDP_DEFAULTS.items():
        value = ddp.get(key, default)
        if value != default:
            value = {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
            parts.append(f"{_DDP_SHORT[key]}={value:g}" if isinstance(value, float) else f"{_DDP_SHORT[key]}={value}")
    if nccl_env:
        parts.append(nccl_env_label(nccl_env))
    return "+".join(parts) or PLAIN_LABEL


def lm_world_sizes(tr: dict, backend: str, sizes: list[int], models: list[str]) -> tuple[list[int], list[dict]]:
    """training.lm.world_sizes: `auto` on GPUs (NCCL) is 1 rank and the largest world size, the two a
    language model's scaling efficiency needs (each size between adds ~35 s of 1.3B-model launches:
    on an 8-GPU node, sizes 2 and 4 left the default run past its 5 minutes); elsewhere (Gloo on CPU,
    tiny models) every size. A list keeps the sizes it names (the 1-rank baseline always runs)."""
    every = sorted({1, *sizes})
    chosen = tr["lm"].get("world_sizes", "auto")
    if chosen == "auto":
        kept = [ws for ws in every if ws in (1, max(every))] if backend == "nccl" else every
    else:
        kept = [ws for ws in every if ws == 1 or ws in chosen]
    left = [ws for ws in every if ws not in kept]
    if not left or not models:
        return kept, []
    return kept, [{"what": f"{', '.join(models)} at world sizes {left}",
                   "why": "on GPUs the language models run at 1 rank and the largest world size (training.lm.world_sizes: "
                          f"auto; the MLP draws the scaling curve at every size); every size: "
                          f"--config training='{{lm: {{world_sizes: {every}}}}}'"}]


def whole_node_sizes(config: dict, backend: str, sizes: list[int]) -> tuple[list[int], list[dict]]:
    """On GPUs (NCCL) with world_sizes: auto and no training.world_sizes, training measures the whole
    node (the largest size) beside its 1-rank baseline: the scaling efficiency a user's job on that
    node gets. The sizes between are the comm family's (the collectives at every size); each between
    is one more ~17 s launch (an 8-GPU node's 2 and 4 left the default run past its 5 minutes:
    benchmarks/results/day-one-h100x4-2026-11-27). An explicit list, here or at the top, is kept."""
    tr = config["training"]
    if backend != "nccl" or tr.get("world_sizes") or config["world_sizes"] != "auto" or len(sizes) < 2:
        return sizes, []
    left = sizes[:-1]
    return sizes[-1:], [{"what": f"training at world sizes {left}",
                         "why": "on GPUs training measures the whole node and 1 rank (world_sizes: auto; the comm family "
                                f"measures every size); every size: --config training='{{world_sizes: {sizes}}}'"}]


def training_jobs(config: dict, gpus: int) -> tuple[list[TrainingJob], list[dict]]:
    """The training jobs (and what was skipped, and why): the configured DDP setup at every world
    size plus a 1-rank baseline of plain DDP; with `tune`, every tune_space point at the largest
    world size, each with its own 1-rank run (the same DDP settings, NCCL defaults); FSDP (config
    `fsdp`) at every world size > 1 where training.strategies (the MLP) or training.lm.strategies
    (gpt, lora) has it."""
    tr = config["training"]
    backend, why = family_backend(config, "training", gpus)
    if why:
        return [], [why]
    sizes, skipped = placeable(config, backend, gpus, sorted(set(tr.get("world_sizes") or world_sizes(config, gpus))),
                               "training world sizes")
    sizes, why = whole_node_sizes(config, backend, sizes)
    skipped += why
    jobs = {}

    # The language-model block (training.lm): plain DDP and/or FSDP at its world sizes; plain DDP on
    # one rank is the fair baseline of both (FSDP on one rank is FSDP's own).
    lm_models = [m for m in tr["models"] if workload(m).block == "lm"]
    lm_sizes, lm_skipped = lm_world_sizes(tr, backend, sizes, lm_models)
    skipped += lm_skipped
    # FSDP on one rank is FSDP's own overhead, not a baseline (plain DDP on one rank is the fair one of
    # both): on GPUs with lm.world_sizes auto it is left out (~10 s per model of the default run).
    own_fsdp_1 = not (backend == "nccl" and tr["lm"].get("world_sizes", "auto") == "auto" and max(lm_sizes, default=1) > 1)
    # the layouts that could run on one rank beside the baseline (a 2D layout cannot)
    own_1 = [s for s in tr["lm"]["strategies"] if not layout(s).baseline and layout(s).min_world_size == 1]
    if lm_models and not own_fsdp_1 and own_1:
        skipped.append({"what": f"{', '.join(own_1)} at 1 rank ({', '.join(lm_models)})",
                        "why": "FSDP's scaling efficiency is taken against plain DDP on one rank, the fair baseline of both "
                               "strategies (training.lm.world_sizes: auto); FSDP's own 1-rank run too: "
                               f"--config training='{{lm: {{world_sizes: {lm_sizes}}}}}'"})
    skipped += layout_skipped(tr["lm"], backend, lm_models, lm_sizes)
    # training.lm.compile: every layout once per value (eager, compiled), its 1-rank baseline too: a compiled
    # job's scaling efficiency is taken against the compiled 1-rank run (distbench.training.analysis.summary)
    for model in lm_models:
        for ws in lm_sizes:
            at_1 = {BASELINE, *tr["lm"]["strategies"]} if own_fsdp_1 else {BASELINE}
            for strategy in sorted(at_1 if ws == 1 else tr["lm"]["strategies"]):
                if lm_layout_problem(tr["lm"], backend, model, strategy, ws):
                    continue  # layout_skipped names it
                for compiled in compile_values(tr["lm"]):
                    label = lm_label(strategy, compiled)
                    jobs[(model, ws, label)] = TrainingJob(backend, ws, label, dict(DDP_DEFAULTS), {}, model, strategy,
                                                           compiled)
    # The DDP block (training.gpu/cpu, the DDP knobs, tuning, training.strategies): seed 004's MLP
    # and any workload like it. Plain DDP on one rank is the baseline of every strategy; without
    # "ddp" in training.strategies the DDP setup (and its tuning) is not measured beside it.
    ddp_models = [m for m in tr["models"] if workload(m).block == "ddp"]
    strategies = tr.get("strategies", [BASELINE])
    skipped += ddp_block_skipped(tr, ddp_models, strategies, sizes)
    for model in ddp_models:
        def add(ws, ddp, env):
            full = {**DDP_DEFAULTS, **ddp}
            job = TrainingJob(backend, ws, ddp_label(full, env), full, {k: str(v) for k, v in env.items()}, model)
            jobs.setdefault((model, ws, job.config_label), job)

        add(1, DDP_DEFAULTS, {})  # the fair baseline: plain DDP on one rank
        for sharded in [s for s in strategies if layout(s).sharded] if workload(model).fsdp else []:
            # FSDP2 per block beside it at every size > 1; DDP's knobs (buckets, hooks, accumulation)
            # are not FSDP's: they stay at their defaults, and the label is the strategy's
            for ws in [ws for ws in sizes if ws > 1]:
                jobs[(model, ws, sharded)] = TrainingJob(backend, ws, sharded, dict(DDP_DEFAULTS), {}, model, sharded)
        if BASELINE not in strategies:
            continue
        for ws in sorted({1, *sizes}):
            add(ws, tr["ddp"], {})
        if tr["tune"] and sizes:
            space = tr["tune_space"]
            keys = ["bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "comm_hook", "grad_accum"]
            for values in itertools.product(*(space[k] for k in keys), space["nccl_env"]):
                ddp = dict(zip(keys, values[:-1]))
                env = values[-1] if backend == "nccl" else {}
                add(max(sizes), {**tr["ddp"], **ddp}, env)
                # The point's own 1-rank run leaves NCCL settings out: one rank has no GPU-to-GPU
                # traffic for them to change, and one baseline serves every NCCL variant.
                add(1, {**tr["ddp"], **ddp}, {})
    ordered = sorted(jobs.values(), key=_job_order)
    return ordered, skipped + matmul_skipped(config, ordered)


def lm_heads(lm: dict, backend: str) -> int | None:
    """The attention heads of training.lm's shape on this backend (gpu under NCCL, else cpu)."""
    work = lm["gpu"] if backend == "nccl" else lm["cpu"]
    return work.get("heads") or GPT_SIZES.get(work.get("size") or "", (None, None, None))[1]


def lm_layout_problem(lm: dict, backend: str, model: str, strategy: str, ws: int) -> str | None:
    """Why a 2D layout (hsdp, fsdp_tp) of training.lm cannot run `model` at world size `ws` (None: it can)."""
    return layout_problem(strategy, ws, lm.get("shard_size"), lm.get("tp_size"), lm_heads(lm, backend), model)


def layout_skipped(lm: dict, backend: str, models: list[str], sizes: list[int]) -> list[dict]:
    """The plan's word on each 2D layout (training.lm.strategies: hsdp, fsdp_tp) that cannot run a model at a
    world size: the layout does not divide it (or the heads), or one rank has no second dim. Before any job."""
    out = []
    for strategy in [s for s in lm.get("strategies", ()) if layout(s).group]:
        by_why: dict[str, list] = {}
        for model in models:
            for ws in sizes:
                why = lm_layout_problem(lm, backend, model, strategy, ws)
                if why:
                    by_why.setdefault(why, []).append((model, ws))
        for why, where in by_why.items():
            names = ", ".join(dict.fromkeys(m for m, _ in where))
            sizes_text = ", ".join(str(w) for w in dict.fromkeys(w for _, w in where))
            out.append({"what": f"{strategy} ({names}) at world size {sizes_text}",
                        "why": f"training.lm.strategies element {strategy!r}: {why}"})
    return out


def ddp_block_skipped(tr: dict, models: list[str], strategies: list[str], sizes: list[int]) -> list[dict]:
    """What training.strategies leaves out of the DDP block (the MLP's jobs), said in the plan."""
    out = []
    if not models:
        return out
    no_fsdp = [m for m in models if not workload(m).fsdp]
    for sharded in [s for s in strategies if layout(s).sharded]:
        if no_fsdp:
            out.append({"what": f"{sharded} for {', '.join(no_fsdp)}",
                        "why": "the workload has no blocks to shard (its WorkloadSpec says fsdp=False): DDP only"})
        if not any(ws > 1 for ws in sizes):
            out.append({"what": f"{sharded} ({', '.join(models)})",
                        "why": "FSDP runs at world sizes > 1 only (plain DDP on one rank is its baseline), and this "
                               "run has no training world size above 1"})
    if BASELINE not in strategies:
        left = "the DDP jobs at world sizes > 1" + (" and the tuning sweep (training.tune)" if tr["tune"] else "")
        out.append({"what": f"{left} ({', '.join(models)})",
                    "why": "training.strategies has no ddp: plain DDP on one rank runs, as the baseline"})
    return out


def _job_order(j: TrainingJob):
    return (j.model, j.config_label != PLAIN_LABEL, j.config_label, j.world_size)


def training_params(config: dict, job: TrainingJob) -> dict:
    """The values that shape a training job's measurements (a change reruns the job)."""
    tr = config["training"]
    if workload(job.model).block == "lm":
        return {**lm_params(config, job), **profile_params(config, "training")}  # lm_params: inspect_params
    work = tr["gpu"] if job.backend == "nccl" else tr["cpu"]
    if tr["scaling"] == "strong":  # a fixed global batch, split over the ranks
        top = tr.get("world_sizes") or config["world_sizes"]
        if top == "auto":  # make_plan resolves it on this host (rules/common.smk writes it back)
            raise ValueError("training_params needs world_sizes resolved (distbench.launch.planning.world_sizes)")
        global_batch = tr.get("global_batch_size") or work["batch_size"] * max(top)
    else:  # weak: the per-rank batch is fixed (a new world size must not change the other jobs' params)
        global_batch = work["batch_size"] * job.world_size
    return {"model": job.model, "strategy": job.strategy, "compile": False, **work, "scaling": tr["scaling"], "global_batch_size": global_batch,
            "dtype": tr["dtype"], "optimizer": tr["optimizer"], "warmup_steps": tr["warmup_steps"],
            "steps": tr["steps"], "allreduce_trials": tr["allreduce_trials"], "ddp": dict(job.ddp),
            "op_timeout_s": config["op_timeout_s"], "job_timeout_s": tr["job_timeout_s"],
            "job_env": {k: str(v) for k, v in config["job_env"].items()}, **profile_params(config, "training"),
            **inspect_params(config)}


def block_extras(config: dict, model: str) -> dict:
    """training.lm's top-level keys the workload reads (an Arg's param: lora's lora_rank and
    lora_alpha), for a workload of the lm block; none for the ddp block."""
    lm, spec = config["training"]["lm"], workload(model)
    return {a.param: lm[a.param] for a in spec.args if spec.block == "lm" and a.param and a.param in lm}


def lm_params(config: dict, job: TrainingJob) -> dict:
    """training_params for a job of the lm block (gpt, lora): the workload of training.lm (gpu or
    cpu), weak scaling."""
    tr, lm = config["training"], config["training"]["lm"]
    work = dict(lm["gpu"] if job.backend == "nccl" else lm["cpu"])
    # the 2D layouts' group size (only theirs: the other jobs' params, and so their results, stay as they were)
    group = layout(job.strategy).group
    return {"model": job.model, "strategy": job.strategy, **({group: lm[group]} if group else {}), "compile": bool(job.compile), **work, **block_extras(config, job.model),
            "scaling": "weak", "global_batch_size": work["batch_size"] * job.world_size,
            "optimizer": lm["optimizer"], "warmup_steps": tr["warmup_steps"], "steps": tr["steps"],
            "allreduce_trials": tr["allreduce_trials"], "ddp": dict(job.ddp),
            "op_timeout_s": config["op_timeout_s"], "job_timeout_s": tr["job_timeout_s"],
            "job_env": {k: str(v) for k, v in config["job_env"].items()}, **inspect_params(config)}


def inspect_params(config: dict) -> dict:
    """training.inspect's params of a job (distbench.training.job passes --inspect-dir), only when on: a
    run that never inspects keeps the params it had (turning it on or off reruns the jobs once)."""
    tr = config["training"]
    return {"inspect": True, "inspect_steps": tr["inspect_steps"]} if tr.get("inspect") else {}


MATMUL_SECONDS = 0.25  # timed time per GEMM and GPU: a dozen GEMMs are ~3 s per GPU


def matmul_params(config: dict, jobs: list[TrainingJob]) -> dict:
    """training.matmul_sweep's params: {"sweeps": [{"dtype", "gemms": ["MxNxK", ...]}], "seconds"}, the GEMMs
    of every planned NCCL training job's model (distbench.training.matmul.gemm_shapes at its per-rank
    batch), per dtype; {} when the sweep is off or no job runs on GPUs (a CPU run has no sweep: the plan
    names it, matmul_skipped)."""
    from distbench.training.matmul import gemm_shapes
    from distbench.workloads.registry import workload_shape

    if not config["training"].get("matmul_sweep"):
        return {}
    by_dtype: dict[str, dict[str, None]] = {}
    for job in jobs:
        if job.backend != "nccl":
            continue
        p = training_params(config, job)
        shape = workload_shape(job.model, p)
        if not shape.get("hidden_dim"):
            continue  # a workload without linear layers of one width: no GEMM to name
        try:
            per_rank, _ = workload(job.model).per_rank_batch(p["scaling"], p["batch_size"], p["global_batch_size"],
                                                             job.world_size)
        except ValueError:  # a split the harness refuses: that job measures nothing to compare with
            continue
        micro = max(1, per_rank // max(1, int(p["ddp"].get("grad_accum", 1))))
        gemms = by_dtype.setdefault(p["dtype"], {})
        gemms.update(dict.fromkeys(f"{m}x{n}x{k}" for m, n, k in gemm_shapes(job.model, shape, micro)))
    if not by_dtype:
        return {}
    return {"sweeps": [{"dtype": d, "gemms": list(g)} for d, g in sorted(by_dtype.items())], "seconds": MATMUL_SECONDS}


def matmul_skipped(config: dict, jobs: list[TrainingJob]) -> list[dict]:
    """The plan's word on a matmul sweep asked for where no training job runs on GPUs."""
    if not config["training"].get("matmul_sweep") or not jobs or any(j.backend == "nccl" for j in jobs):
        return []
    return [{"what": "the matmul sweep (training.matmul_sweep)",
             "why": "it measures GPUs, and this run trains on CPU (Gloo): MFU has no achievable peak here, and no spec "
                    "peak either (a CPU has none in the table)"}]


# the plan's fact the comm plan reads (no family imports another: distbench.pipeline.plan.family_plans)
STANDALONE_FACT = "standalone_collectives"


def standalone_collectives(config: dict, jobs: list[TrainingJob]) -> list[dict]:
    """training.inspect: the collectives its inspected multi-rank NCCL jobs run inside their steps, which
    training_instep.csv sets beside the comm family's standalone figures: DDP's float32 all_reduce;
    FSDP's all_gather in the parameters' dtype (bfloat16 for a bfloat16 model: MixedPrecisionPolicy,
    distbench.workloads.fsdp) and its float32 reduce_scatter (reduce_dtype float32). The 2D layouts run
    theirs on sub-groups, each asked for at its group's ranks: HSDP's FSDP collectives over shard_size
    ranks and its float32 all_reduce across the world / shard_size replicas; fsdp_tp's tensor-parallel
    all_reduces over tp_size ranks (activations in the model's dtype forward, their float32 gradients
    backward) and FSDP's over the world / tp_size. A group size the comm family does not run is named
    as skipped by its plan."""
    if not config["training"].get("inspect"):
        return []
    wanted, lm = set(), config["training"]["lm"]
    for job in jobs:
        if job.backend != "nccl" or job.world_size < 2:
            continue
        dtype = "bfloat16" if training_params(config, job)["dtype"] == "bfloat16" else "float32"
        spec = layout(job.strategy)
        wanted.update(spec.collectives_at(job.world_size, lm.get(spec.group) if spec.group else None, dtype))
    return [{"backend": "nccl", "world_size": ws, "op": op, "dtype": dt} for op, dt, ws in sorted(wanted)]


def plan_family(config: dict, gpus: int, gpus_source: str) -> FamilyPlan:  # noqa: ARG001 - the manifest's hook
    """The training family's plan (its manifest's `plan`); with training.inspect, the collectives its
    inspected jobs want measured standalone, as the plan's fact STANDALONE_FACT (the comm plan reads it)."""
    jobs, skipped = training_jobs(config, gpus)
    return FamilyPlan(tuple(jobs), tuple(skipped), {STANDALONE_FACT: standalone_collectives(config, jobs)})


def rule_params(config: dict, plan: dict, job: TrainingJob) -> dict:  # noqa: ARG001 - the manifest's hook
    """A training job's parameters (the manifest's job_params): its workload and DDP/FSDP settings,
    its NCCL settings and strategy."""
    return {**training_params(config, job), "nccl_env": job.nccl_env, "strategy": job.strategy}
