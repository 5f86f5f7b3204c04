"""From a validated config (and the GPUs on this host) to the list of comm jobs.

The Snakefile calls `make_plan` once when the DAG is built; each job's output path carries every
config key that selects it (backend, dtype, world size, NCCL settings), so Snakemake's own
bookkeeping is the cache. Values that tune a job without selecting it (sizes, iters) reach the
rule through `params:`, which makes Snakemake rerun exactly the jobs they change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from distbench.launch.cluster import Layout, job_layout, launch_params, slurm_resources
from distbench.core.sizes import human_bytes, parse_size, sizes_from_config


@dataclass(frozen=True)
class CommJob:
    backend: str
    dtype: str
    world_size: int
    nccl_env_label: str
    nccl_env: dict = field(hash=False, compare=False)

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "dtype": self.dtype, "world_size": self.world_size,
                "nccl_env": self.nccl_env_label}


def nccl_env_label(env: dict) -> str:
    """{} -> 'default'; {NCCL_ALGO: Ring, NCCL_PROTO: Simple} -> 'NCCL_ALGO=Ring+NCCL_PROTO=Simple'."""
    if not env:
        return "default"
    return "+".join(f"{k}={env[k]}" for k in sorted(env))


def detect_gpus() -> tuple[int, str]:
    """GPUs usable on this host, cheaply (no torch import: the no-op rerun must stay fast)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    proc = Path("/proc/driver/nvidia/gpus")
    n = len(list(proc.iterdir())) if proc.is_dir() else None
    if n is None and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
            n = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            n = 0
    n = n or 0
    if visible is not None and n:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        n = min(n, len(ids))
        return n, f"detected {n} (CUDA_VISIBLE_DEVICES={visible!r})"
    return n, f"detected {n} via {'/proc/driver/nvidia' if proc.is_dir() else 'nvidia-smi -L' if shutil.which('nvidia-smi') else 'no NVIDIA driver on this host'}"


def make_plan(config: dict, detected: tuple[int, str] | None = None) -> dict:
    """Return {'jobs': [CommJob], 'gpus': int, 'gpus_source': str, 'skipped': [{'what','why'}], ...}."""
    if config["gpus"] == "auto":
        gpus, source = detected if detected is not None else detect_gpus()
        gpus_source = f"auto: {source}"
    else:
        gpus, gpus_source = int(config["gpus"]), "declared in config (gpus)"
    comm = config["comm"]
    skipped, jobs, world_sizes = [], [], {}
    for backend in config["backends"]:
        if backend == "nccl" and gpus == 0:
            skipped.append({"what": "backend nccl", "why": f"no GPU on this host ({gpus_source})"})
            continue
        sizes, why = placeable(config, backend, gpus, list(config["world_sizes"]), f"{backend} world sizes")
        skipped += why
        envs = comm["nccl_env"] if backend == "nccl" else [{}]
        world_sizes[backend] = sizes
        for dtype in comm["dtypes"]:
            for ws in sizes:
                for env in _unique_envs(envs):
                    jobs.append(CommJob(backend, dtype, ws, nccl_env_label(env), {k: str(v) for k, v in env.items()}))
    if "gloo" in config["backends"]:
        cap = parse_size(comm["gloo"]["max_bytes"])
        above = [s for s in sizes_from_config(comm) if s > cap]
        if above:
            skipped.append({"what": f"gloo sizes above {human_bytes(cap)} ({len(above)} sizes up to {human_bytes(max(above))})",
                            "why": "comm.gloo.max_bytes keeps CPU runs short"})
    tjobs, tskipped = training_jobs(config, gpus)
    mjobs, mskipped = memory_jobs(config, gpus)
    return {"jobs": jobs, "gpus": gpus, "gpus_source": gpus_source, "skipped": skipped + tskipped + mskipped,
            "world_sizes": world_sizes, "backends_run": sorted({j.backend for j in jobs}),
            "training_jobs": tjobs, "memory_jobs": mjobs}


def placeable(config: dict, backend: str, gpus: int, sizes: list[int], what: str) -> tuple[list[int], list[dict]]:
    """The world sizes a job can be placed at (distbench.launch.cluster.job_layout), and a skipped entry
    naming the others and why."""
    kept, dropped, whys = [], [], []
    for ws in sizes:
        layout, why = job_layout(ws, backend, gpus, config["cluster"])
        if layout is None:
            dropped.append(ws)
            whys.append(why)
        else:
            kept.append(ws)
    if not dropped:
        return kept, []
    if backend == "nccl" and config["cluster"]["nodes"] == 1 and config["cluster"]["ranks_per_node"] == "auto":
        why = f"above gpus={gpus}: NCCL needs one GPU per rank (cluster.nodes is 1)"
    else:
        why = "; ".join(dict.fromkeys(whys))
    return kept, [{"what": f"{what} {dropped}", "why": why}]


def layout_of(config: dict, plan: dict, backend: str, world_size: int) -> Layout:
    """The placed job's layout (nodes x ranks per node)."""
    layout, why = job_layout(world_size, backend, plan["gpus"], config["cluster"])
    if layout is None:  # the plan only holds placeable jobs
        raise ValueError(why)
    return layout


def job_launch(config: dict, plan: dict, backend: str, world_size: int) -> dict:
    """What the launcher needs to start a job's agents (its nodes, ranks per node, launcher):
    passed through the rule's params, so a change of layout reruns the job."""
    return launch_params(layout_of(config, plan, backend, world_size), config["cluster"])


SLURM_RESOURCES = ("nodes", "tasks", "tasks_per_gpu", "gres", "cpus_per_task", "runtime", "mem_mb", "slurm_extra")


def job_resources(config: dict, plan: dict, family: str, job) -> dict:
    """A benchmark job's resources for a cluster executor (distbench.launch.cluster.slurm_resources),
    every key of SLURM_RESOURCES present (a rule declares them all; the local executor ignores them)."""
    layout = layout_of(config, plan, job.backend, job.world_size)
    res = slurm_resources(layout, job.backend, config[family]["job_timeout_s"], config["cluster"])
    return {"tasks": layout.nodes, "tasks_per_gpu": 0, "gres": "", **res}


def probe_resources(config: dict, plan: dict) -> dict:
    """A probe's resources for a cluster executor: one node, exclusively, with all its GPUs (what
    the probes describe), or none on a CPU-only plan."""
    gpus = plan["gpus"]
    res = slurm_resources(Layout(1, max(gpus, 1)), "nccl" if gpus else "gloo", config["comm"]["job_timeout_s"],
                          config["cluster"])
    return {"tasks": 1, "tasks_per_gpu": 0, "gres": "", **res}


def _unique_envs(envs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for env in envs:
        label = nccl_env_label(env)
        if label not in seen:
            seen.add(label)
            out.append(env)
    return out


def job_params(config: dict, backend: str, nccl_env: str = "default") -> dict:
    """The values that shape a job's measurements (a change reruns the job via Snakemake's params trigger)."""
    comm = config["comm"]
    sizes = sizes_from_config(comm)
    ops = comm["ops"] if nccl_env == "default" else comm.get("nccl_env_ops") or comm["ops"]
    p = {"ops": list(ops), "warmup": comm["warmup"], "iters": comm["iters"], "trials": comm["trials"],
         "timing": list(comm["timing"]), "inplace": list(comm["inplace"]),
         "graph_launches": comm["graph_launches"], "rank_agg": comm["rank_agg"],
         "rotate_bytes": parse_size(comm["rotate_bytes"]),
         "op_timeout_s": comm["op_timeout_s"], "job_timeout_s": comm["job_timeout_s"],
         "job_env": {k: str(v) for k, v in config["job_env"].items()}}
    pairs = [parse_size(s) for s in comm["pairs_sizes"]]
    if backend == "gloo":
        g = comm["gloo"]
        cap = parse_size(g["max_bytes"])
        sizes = [s for s in sizes if s <= cap]
        pairs = [min(s, cap) for s in pairs]
        p.update(warmup=g["warmup"], iters=g["iters"], trials=g["trials"], timing=["host"])
    p["sizes"] = sizes
    if "all_to_all_v" in ops:  # only then: a traffic change reruns no job that does not measure it
        p["traffic"] = list(comm["traffic"])
    p.update(profile_params(config, "comm"))
    # the pair matrix's sizes; the plan turns it on for one job per backend (pairs_job)
    p.update(pairs_sizes=sorted(set(pairs)), pairs_iters=comm["pairs_iters"], pairs_trials=comm["pairs_trials"],
             pairs=False)
    return p


def pairs_job(config: dict, plan: dict, job: CommJob) -> bool:
    """Whether this comm job also measures the GPU-pair matrix (comm.pairs): the job at its
    backend's largest world size, with NCCL's defaults and the first dtype."""
    sizes = plan["world_sizes"].get(job.backend) or []
    return bool(config["comm"]["pairs"] and sizes and job.world_size == max(sizes) and job.world_size > 1
                and job.nccl_env_label == "default" and job.dtype == config["comm"]["dtypes"][0])


def plan_summary(plan: dict, gpus_source: str | None = None) -> dict:
    """The plan as the report shows it (plain data: it reaches the report rule through params)."""
    return {"gpus": plan["gpus"], "gpus_source": gpus_source or plan["gpus_source"], "skipped": plan["skipped"],
            "world_sizes": plan["world_sizes"], "backends_run": plan["backends_run"],
            "jobs": [j.wildcards for j in plan["jobs"]],
            "training_jobs": [j.wildcards for j in plan.get("training_jobs", [])],
            "memory_jobs": [j.wildcards for j in plan.get("memory_jobs", [])]}


def nccl_probe_params(config: dict, plan: dict) -> dict:
    """The NCCL debug probe runs at the largest NCCL world size (world_size 0: nothing to probe, and why)."""
    # one node: the probe is a torchrun job of its own (distbench.probes.nccl_probe), never multi-node
    ws = max([w for w in plan["world_sizes"].get("nccl") or [] if w <= plan["gpus"]] or [0])
    why = next((s["why"] for s in plan["skipped"] if s["what"] == "backend nccl"), "no NCCL jobs in this config")
    params = job_params(config, "nccl")
    return {"world_size": ws, "why": why, "ops": params["ops"], "sizes": params["sizes"], "job_env": params["job_env"]}


# --- the training family -----------------------------------------------------------------------

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
    model: str = "mlp"  # mlp, gpt or lora
    strategy: str = "ddp"  # ddp, or fsdp (gpt/lora; its config label is 'fsdp')

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "model": self.model, "world_size": self.world_size, "config": self.config_label}


PLAIN_LABEL = "plain"


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


def family_backend(config: dict, family: str, gpus: int) -> tuple[str | None, dict | None]:
    """The backend a one-backend family (training, memory) runs on: NCCL where GPUs exist and
    nccl is configured, else Gloo; or None and why the family does not run."""
    if not config[family]["enabled"]:
        return None, {"what": f"{family} family", "why": f"{family}.enabled is false"}
    if "nccl" in config["backends"] and gpus > 0:
        return "nccl", None
    if "gloo" in config["backends"]:
        return "gloo", None
    return None, {"what": f"{family} family", "why": f"backend nccl needs a GPU and gloo is not in backends (gpus={gpus})"}


def training_jobs(config: dict, gpus: int) -> tuple[list[TrainingJob], list[dict]]:
    """The training jobs (and what was skipped, and why): the configured DDP setup at every world
    size plus a 1-rank baseline of plain DDP; with `tune`, every tune_space point at the largest
    world size, each with its own 1-rank run (the same DDP settings, NCCL defaults)."""
    import itertools

    tr = config["training"]
    backend, why = family_backend(config, "training", gpus)
    if why:
        return [], [why]
    sizes, skipped = placeable(config, backend, gpus, sorted(set(tr.get("world_sizes") or config["world_sizes"])),
                               "training world sizes")
    jobs = {}

    def add(ws, ddp, env):
        full = {**DDP_DEFAULTS, **ddp}
        job = TrainingJob(backend, ws, ddp_label(full, env), full, {k: str(v) for k, v in env.items()})
        jobs.setdefault(("mlp", ws, job.config_label), job)

    # The language models: plain DDP and/or FSDP at every world size; plain DDP on one rank is the
    # fair baseline of both (FSDP on one rank is FSDP's own).
    for model in [m for m in tr["models"] if m != "mlp"]:
        for ws in sorted({1, *sizes}):
            for strategy in sorted({"ddp", *tr["lm"]["strategies"]} if ws == 1 else tr["lm"]["strategies"]):
                label = PLAIN_LABEL if strategy == "ddp" else strategy
                jobs[(model, ws, label)] = TrainingJob(backend, ws, label, dict(DDP_DEFAULTS), {}, model, strategy)
    if "mlp" not in tr["models"]:
        return sorted(jobs.values(), key=_job_order), skipped
    for ws in sorted({1, *sizes}):
        add(ws, tr["ddp"], {})
    add(1, DDP_DEFAULTS, {})  # the fair baseline: plain DDP on one rank
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
    return sorted(jobs.values(), key=_job_order), skipped


def _job_order(j: TrainingJob):
    return (j.model, j.config_label != PLAIN_LABEL, j.config_label, j.world_size)


def profile_params(config: dict, family: str) -> dict:
    """profile / profile_steps for a family's jobs, only when on: a run that never profiles keeps
    the params it had (turning profiling on or off reruns the family's jobs once)."""
    from distbench.launch.profiling import family_mode

    mode = family_mode(config, family)
    return {} if mode == "off" else {"profile": mode, "profile_steps": config["profile_steps"]}


def training_params(config: dict, job: TrainingJob) -> dict:
    """The values that shape a training job's measurements (a change reruns the job)."""
    tr = config["training"]
    if job.model != "mlp":
        return {**lm_params(config, job), **profile_params(config, "training")}
    work = tr["gpu"] if job.backend == "nccl" else tr["cpu"]
    if tr["scaling"] == "strong":  # a fixed global batch, split over the ranks
        global_batch = tr.get("global_batch_size") or work["batch_size"] * max(tr.get("world_sizes") or config["world_sizes"])
    else:  # weak: the per-rank batch is fixed (a new world size must not change the other jobs' params)
        global_batch = work["batch_size"] * job.world_size
    return {"model": "mlp", "strategy": "ddp", "compile": False, **work, "scaling": tr["scaling"], "global_batch_size": global_batch,
            "dtype": tr["dtype"], "optimizer": tr["optimizer"], "warmup_steps": tr["warmup_steps"],
            "steps": tr["steps"], "allreduce_trials": tr["allreduce_trials"], "ddp": dict(job.ddp),
            "op_timeout_s": config["comm"]["op_timeout_s"], "job_timeout_s": tr["job_timeout_s"],
            "job_env": {k: str(v) for k, v in config["job_env"].items()}, **profile_params(config, "training")}


def lm_params(config: dict, job: TrainingJob) -> dict:
    """training_params for a gpt/lora job: the workload of training.lm (gpu or cpu), weak scaling."""
    tr, lm = config["training"], config["training"]["lm"]
    work = dict(lm["gpu"] if job.backend == "nccl" else lm["cpu"])
    lora = {"lora_rank": lm["lora_rank"], "lora_alpha": lm["lora_alpha"]} if job.model == "lora" else {}
    return {"model": job.model, "strategy": job.strategy, "compile": lm["compile"], **work, **lora,
            "scaling": "weak", "global_batch_size": work["batch_size"] * job.world_size,
            "optimizer": lm["optimizer"], "warmup_steps": tr["warmup_steps"], "steps": tr["steps"],
            "allreduce_trials": tr["allreduce_trials"], "ddp": dict(job.ddp),
            "op_timeout_s": config["comm"]["op_timeout_s"], "job_timeout_s": tr["job_timeout_s"],
            "job_env": {k: str(v) for k, v in config["job_env"].items()}}


@dataclass(frozen=True)
class MemoryJob:
    backend: str
    world_size: int
    model: str  # mlp, gpt or lora
    config_label: str  # ddp, ddp+gbv (gradient_as_bucket_view) or fsdp
    strategy: str = field(compare=False)
    gradient_as_bucket_view: bool = field(compare=False)

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "model": self.model, "world_size": self.world_size, "config": self.config_label}


def memory_jobs(config: dict, gpus: int) -> tuple[list[MemoryJob], list[dict]]:
    """One memory job per model, strategy (DDP with each gradient_as_bucket_view value; FSDP for
    gpt/lora) and world size."""
    mem = config["memory"]
    backend, why = family_backend(config, "memory", gpus)
    if why:
        return [], [why]
    sizes, skipped = placeable(config, backend, gpus, sorted(set(mem["world_sizes"])), "memory world sizes")
    views = list(mem["gradient_as_bucket_view"])
    if backend == "gloo" and len(views) > 1:
        # Its effect is on the GPU allocator's peak; on CPU the counted split is the same.
        skipped.append({"what": "memory jobs with gradient_as_bucket_view=true",
                        "why": "its effect is on the GPU allocator's peak: on CPU only the DDP default is measured"})
        views = [False]
    jobs = []
    for model in mem["models"]:
        for ws in sizes:
            for strategy in mem["strategies"]:
                if strategy == "fsdp":
                    if model != "mlp":
                        jobs.append(MemoryJob(backend, ws, model, "fsdp", "fsdp", False))
                    continue
                for gbv in views:
                    jobs.append(MemoryJob(backend, ws, model, "ddp+gbv" if gbv else "ddp", "ddp", gbv))
    return sorted(jobs, key=lambda j: (j.model, j.config_label, j.world_size)), skipped


def memory_params(config: dict, job: MemoryJob) -> dict:
    """The values that shape a memory job's measurements (a change reruns the job)."""
    tr, mem = config["training"], config["memory"]
    on = "gpu" if job.backend == "nccl" else "cpu"
    if job.model == "mlp":
        work = {k: v for k, v in tr[on].items() if k != "batch_size"}
        work["dtype"], batches = tr["dtype"], mem[on]["mlp_batch_sizes"]
    else:
        work = {k: v for k, v in tr["lm"][on].items() if k != "batch_size"}
        batches = mem[on]["lm_batch_sizes"]
        if job.model == "lora":
            work.update(lora_rank=tr["lm"]["lora_rank"], lora_alpha=tr["lm"]["lora_alpha"])
    return {"model": job.model, **work, "optimizer": mem["optimizer"], "batch_sizes": sorted(set(batches)),
            "search": mem["search"], "snapshot": mem["snapshot"], "op_timeout_s": config["comm"]["op_timeout_s"],
            "job_timeout_s": mem["job_timeout_s"], "job_env": {k: str(v) for k, v in config["job_env"].items()}}
