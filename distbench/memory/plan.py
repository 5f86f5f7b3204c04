"""The memory family's jobs and their params (torch-free: the Snakefile plans without torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from distbench.core.layout_spec import layout
from distbench.core.manifest import FamilyPlan
from distbench.core.units import counts_noun
from distbench.launch.planning import family_backend, placeable
from distbench.workloads.registry import workload


@dataclass(frozen=True)
class MemoryJob:
    backend: str
    world_size: int
    model: str  # a workload of distbench.workloads.registry
    config_label: str  # ddp, ddp+gbv (gradient_as_bucket_view) or fsdp
    strategy: str = field(compare=False)
    gradient_as_bucket_view: bool = field(compare=False)
    # the largest-batch search runs in this job (memory.search and memory.search_at)
    search: bool = field(default=True, compare=False)

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "model": self.model, "world_size": self.world_size, "config": self.config_label}


def memory_world_sizes(mem: dict, backend: str, gpus: int) -> list[int]:
    """memory.world_sizes: `auto` is 2 ranks on GPUs (1 with a single GPU): DDP's per-rank split at 2
    ranks is the 1-rank one plus its buckets, FSDP's needs more than one rank, and the 1-rank launch
    cost ~29 s of the default run; on CPU 1 and 2, the 1-rank split beside the 2-rank one. A list is kept as given."""
    if mem["world_sizes"] != "auto":
        return sorted(set(mem["world_sizes"]))
    if backend == "nccl":
        return [2] if gpus >= 2 else [1]
    return [1, 2]


def memory_models(config: dict, backend: str) -> tuple[list[str], list[dict]]:
    """memory.models: a list as given; `auto` on GPUs the language models of training.models (the
    MLP's largest batch passed the search cap, 65,536 per rank at 2.7 GiB on an H100, and its job cost
    ~13 s of the default run: benchmarks/results/day-one-h100x4-2026-11-27), on CPU every model of
    training.models (the MLP is the CPU run's quick answer)."""
    chosen = config["memory"]["models"]
    if chosen != "auto":
        return list(chosen), []
    every = list(config["training"]["models"])
    if backend != "nccl":
        return every, []
    kept = [m for m in every if workload(m).block == "lm"] or every
    left = [m for m in every if m not in kept]
    if not left:
        return kept, []
    return kept, [{"what": f"memory jobs of {', '.join(left)}",
                   "why": "on GPUs memory measures the language models (memory.models: auto: the MLP's largest batch "
                          "passes the search cap); every model: "
                          f"--config memory='{{models: [{', '.join(every)}]}}'"}]


def memory_jobs(config: dict, gpus: int) -> tuple[list[MemoryJob], list[dict]]:
    """One memory job per model, strategy (DDP with each gradient_as_bucket_view value; FSDP for
    gpt/lora) and world size."""
    mem = config["memory"]
    backend, why = family_backend(config, "memory", gpus)
    if why:
        return [], [why]
    sizes, skipped = placeable(config, backend, gpus, memory_world_sizes(mem, backend, gpus), "memory world sizes")
    if mem["world_sizes"] == "auto" and backend == "nccl" and gpus >= 2:
        skipped.append({"what": "memory jobs at 1 rank",
                        "why": "on GPUs memory measures at 2 ranks (memory.world_sizes: auto: DDP's per-rank split is the "
                               "1-rank one plus its buckets, FSDP's needs 2); a full run: --config memory='{world_sizes: [1, 2]}'"})
    views = list(mem["gradient_as_bucket_view"])
    if backend == "gloo" and len(views) > 1:
        # Its effect is on the GPU allocator's peak; on CPU the counted split is the same.
        skipped.append({"what": "memory jobs with gradient_as_bucket_view=true",
                        "why": "its effect is on the GPU allocator's peak: on CPU only the DDP default is measured"})
        views = [False]
    if backend == "nccl" and views == [False]:
        skipped.append({"what": "memory jobs with gradient_as_bucket_view=true",
                        "why": "not in the default (its effect on the GPU allocator's peak, one more job per DDP "
                               "configuration); a full run: --config memory='{gradient_as_bucket_view: [false, true]}'"})
    # The largest batch per rank is searched where the question is asked: at the largest world size
    # (DDP's replicas each hold the whole model; the extra ranks add only the buckets). Each search
    # is several steps at growing batches (5-6 s of a 9 s job on an H200).
    search_sizes = set(sizes) if mem["search_at"] == "all" else set(sizes[-1:])
    if mem["search"] and backend == "nccl" and len(sizes) > len(search_sizes):
        skipped.append({"what": f"the largest-batch search at {counts_noun(sizes[:-1], 'rank')}",
                        "why": f"memory.search_at largest: searched at {sizes[-1]} ranks only; a full run: "
                               "--config memory='{search_at: all}'"})
    models, why = memory_models(config, backend)
    skipped += why
    jobs = []
    for model in models:
        for ws in sizes:
            for strategy in mem["strategies"]:
                if layout(strategy).sharded:
                    # FSDP for the language models only, as memory.strategies says (the MLP's FSDP: training)
                    if workload(model).fsdp and workload(model).block == "lm":
                        jobs.append(MemoryJob(backend, ws, model, strategy, strategy, False, ws in search_sizes))
                    continue
                for gbv in views:  # DDP: with each gradient_as_bucket_view value
                    jobs.append(MemoryJob(backend, ws, model, f"{strategy}+gbv" if gbv else strategy, strategy, gbv,
                                          ws in search_sizes))
    return sorted(jobs, key=lambda j: (j.model, j.config_label, j.world_size)), skipped


def memory_params(config: dict, job: MemoryJob) -> dict:
    """The values that shape a memory job's measurements (a change reruns the job)."""
    tr, mem = config["training"], config["memory"]
    on = "gpu" if job.backend == "nccl" else "cpu"
    spec = workload(job.model)
    if spec.block == "ddp":  # training.gpu/cpu's shape, the training dtype, the MLP's batch sizes
        work = {k: v for k, v in tr[on].items() if k != "batch_size"}
        work["dtype"], batches = tr["dtype"], mem[on]["mlp_batch_sizes"]
    else:  # training.lm's shape and the keys its Args name (lora_rank, lora_alpha)
        work = {k: v for k, v in tr["lm"][on].items() if k != "batch_size"}
        batches = mem[on]["lm_batch_sizes"]
        work.update({a.param: tr["lm"][a.param] for a in spec.args if a.param and a.param in tr["lm"]})
    return {"model": job.model, **work, "optimizer": mem["optimizer"], "batch_sizes": sorted(set(batches)),
            "search": mem["search"] and job.search, "search_max_batch": mem["search_max_batch"], "snapshot": mem["snapshot"], "op_timeout_s": config["op_timeout_s"],
            "job_timeout_s": mem["job_timeout_s"], "job_env": {k: str(v) for k, v in config["job_env"].items()}}


def plan_family(config: dict, gpus: int, gpus_source: str) -> FamilyPlan:  # noqa: ARG001 - the manifest's hook
    """The memory family's plan (its manifest's `plan`)."""
    jobs, skipped = memory_jobs(config, gpus)
    return FamilyPlan(tuple(jobs), tuple(skipped))


def rule_params(config: dict, plan: dict, job: MemoryJob) -> dict:  # noqa: ARG001 - the manifest's hook
    """A memory job's parameters (the manifest's job_params)."""
    return {**memory_params(config, job), "strategy": job.strategy,
            "gradient_as_bucket_view": job.gradient_as_bucket_view}
