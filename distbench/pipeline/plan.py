"""From a validated config (and the GPUs on this host) to the run's plan: every family's jobs (each
manifest's `plan` hook, looped over: no family is named here), where each job is placed, its cluster
resources, the probe's params, and the plan as the report shows it.

The Snakefile calls `make_plan` once when the DAG is built; each job's output path carries every
config key that selects it, so Snakemake's own bookkeeping is the cache.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
from pathlib import Path

from distbench.core.manifest import FamilyPlan
from distbench.core.plan_facts import NO_GPU_FOR_NCCL, NcclProbeWorkload, skipped_part, with_reason
from distbench.pipeline.hooks import resolve
from distbench.launch.cluster import Layout, job_layout, launch_params, slurm_resources
from distbench.launch.planning import world_sizes as world_sizes_of
from distbench.launch.profiling import family_mode
from distbench.pipeline.families import manifest, manifests


def profiled(config: dict) -> dict[str, str]:
    """{family: profile mode} of the families whose jobs write traces (their manifests say `traced`)
    and are profiled (config `profile`, per family: torch or nsys)."""
    modes = {m.name: family_mode(config, m.name) for m in manifests() if m.traced}
    return {f: mode for f, mode in modes.items() if mode != "off"}


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


def reads_facts(hook) -> bool:
    """Whether a plan hook takes the other families' facts (a keyword parameter `facts`)."""
    try:
        return "facts" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        return False


def family_plans(config: dict, gpus: int, gpus_source: str) -> dict[str, FamilyPlan]:
    """{family: its FamilyPlan} of every family with a plan hook (its manifest's `plan`), in order. A
    hook that takes `facts` (reads_facts) is planned after the others and given their facts, merged
    (FamilyPlan.facts: e.g. the collectives one family wants another to measure): no family imports
    another, the plan carries what one states to the other. Such a hook sees the facts of the hooks
    that take none, not those of another that takes them."""
    hooks = {m.name: resolve(m.plan) for m in manifests() if m.plan}
    plans = {name: hook(config, gpus, gpus_source) for name, hook in hooks.items() if not reads_facts(hook)}
    facts = {k: v for p in plans.values() for k, v in p.facts.items()}
    for name, hook in hooks.items():
        if name not in plans:
            plans[name] = hook(config, gpus, gpus_source, facts=dict(facts))
    return {name: plans[name] for name in hooks}


def make_plan(config: dict, detected: tuple[int, str] | None = None) -> dict:
    """Return the run's plan: {'jobs': {family: [job]} (every family with a plan hook, looped over the
    manifests), 'gpus': int, 'gpus_source': str, 'skipped': [SkippedPart] (every family's; each reads
    as its {'what','why'}),
    'health_nodes': int (the most nodes a family's jobs span beyond their world size), 'profiled':
    {family: mode}, 'config_world_sizes': [int] (the top-level list; `auto` resolved on these GPUs),
    'world_sizes_auto': bool}, and each family's facts (FamilyPlan.facts, a PlanFacts or a mapping: e.g.
    the world sizes per backend and the backends run), a fact stated by two families refused."""
    if config["gpus"] == "auto":
        gpus, source = detected if detected is not None else detect_gpus()
        gpus_source = f"auto: {source}"
    else:
        gpus, gpus_source = int(config["gpus"]), "declared in config (gpus)"
    top = world_sizes_of(config, gpus)  # world_sizes: auto -> the node's own (distbench.launch.planning)
    plans = family_plans(config, gpus, gpus_source)
    # each family's jobs as its plan gives them (a sequence; the node rounds' is made when first read)
    plan = {"jobs": {name: p.jobs for name, p in plans.items()}, "gpus": gpus, "gpus_source": gpus_source,
            "skipped": [skipped_part(s) for p in plans.values() for s in p.skipped],
            "health_nodes": max([p.hosts_spanned for p in plans.values()] or [0]), "profiled": profiled(config),
            # the top-level world_sizes as planned: the list given, or what `auto` chose on these GPUs
            "config_world_sizes": top, "world_sizes_auto": config["world_sizes"] == "auto",
            "world_sizes": {}, "backends_run": []}
    stated: dict[str, str] = {}
    for name, p in plans.items():
        for key, value in p.facts.items():
            if key in stated:
                raise ValueError(f"the plan's {key!r} is stated by both {stated[key]} and {name}")
            stated[key] = name
            plan[key] = value
    return plan


def all_jobs(plan: dict) -> list:
    """Every planned job of every family, in the families' order."""
    return [j for jobs in plan["jobs"].values() for j in jobs]


# A host with this many cores has cores to spare beside a benchmark job (a GPU job's ranks drive the
# GPUs from a few cores; an 8-GPU node has 100+): the steps that read tables may run beside it.
SIDE_BY_SIDE_MIN_CORES = 8


def side_threads(plan: dict, cores: int) -> int:
    """The threads of the steps that only read tables (aggregates, figures, predictions, the report):
    0 where NCCL jobs measure the GPUs of a host with SIDE_BY_SIDE_MIN_CORES cores or more, so
    Snakemake runs them beside a benchmark job even under --cores 1 (a job of 0 threads takes none of
    the cores; the benchmark jobs take them all, so they never run beside each other); they took ~80 s
    of the 4x H100 default run one after another (benchmarks/results/day-one-h100x4-2026-11-27). 1
    elsewhere: on a CPU host the Gloo jobs' cores are what they measure, so those steps wait."""
    gpu_host = plan["gpus"] >= 1 and any(j.backend == "nccl" for j in all_jobs(plan))
    return 0 if gpu_host and cores >= SIDE_BY_SIDE_MIN_CORES else 1


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


# the SLURM plugin's resource names (its own "nodes" is not a family name)
SLURM_RESOURCES = ("nodes", "tasks", "tasks_per_gpu", "gres", "cpus_per_task", "runtime", "mem_mb", "slurm_extra")  # not a family name


def job_timeout_s(config: dict, family: str) -> int:
    """A family's job time limit: its config section's job_timeout_s, else its manifest's default."""
    section = config.get(family)
    own = section.get("job_timeout_s") if isinstance(section, dict) else None
    return int(own or manifest(family).job_timeout_s)


def job_resources(config: dict, plan: dict, family: str, job) -> dict:
    """A benchmark job's resources for a cluster executor (distbench.launch.cluster.slurm_resources),
    every key of SLURM_RESOURCES present (a rule declares them all; the local executor ignores them):
    its family's own (the manifest's job_resources), else placed by backend and world size."""
    own = manifest(family).job_resources
    if own:
        return resolve(own)(config, plan, job)
    layout = layout_of(config, plan, job.backend, job.world_size)
    res = slurm_resources(layout, job.backend, job_timeout_s(config, family), config["cluster"])
    return {"tasks": layout.nodes, "tasks_per_gpu": 0, "gres": "", **res}


# A probe's or the health check's time limit where no family states one (seconds; a family states it
# as the plan's fact `probe_timeout_s`: the NCCL probe and the health check's load run its collectives).
PROBE_TIMEOUT_S = 1800


def probe_timeout_s(plan: dict) -> int:
    return int(plan.get("probe_timeout_s") or PROBE_TIMEOUT_S)


def probe_resources(config: dict, plan: dict) -> dict:
    """A probe's resources for a cluster executor: one node, exclusively, with all its GPUs (what
    the probes describe), or none on a CPU-only plan."""
    gpus = plan["gpus"]
    res = slurm_resources(Layout(1, max(gpus, 1)), "nccl" if gpus else "gloo", probe_timeout_s(plan),
                          config["cluster"])
    return {"tasks": 1, "tasks_per_gpu": 0, "gres": "", **res}


def health_launch(config: dict, plan: dict) -> dict:
    """The nodes the health check reads (distbench.health.node): as many as the widest benchmark
    job spans, or the node-pair rounds when they run on cluster nodes; launcher and hosts as theirs."""
    spanned = [m.name for m in manifests() if m.plan and not m.job_resources]  # placed by world size
    jobs = [j for name in spanned for j in plan["jobs"].get(name, [])]
    n = max([layout_of(config, plan, j.backend, j.world_size).nodes for j in jobs] + [1, plan["health_nodes"]])
    cl = config["cluster"]
    return {"nodes": n, "launcher": cl["launcher"], "hosts": list(cl["hosts"])}  # cluster nodes: not a family name


def health_resources(config: dict, plan: dict) -> dict:
    """The health check's resources for a cluster executor: a probe's (one node, exclusively, with its
    GPUs) on each node it reads."""
    n, gpus = health_launch(config, plan)["nodes"], plan["gpus"]  # cluster nodes: not a family name
    res = slurm_resources(Layout(n, max(gpus, 1)), "nccl" if gpus else "gloo", probe_timeout_s(plan),
                          config["cluster"])
    return {"tasks": n, "tasks_per_gpu": 0, "gres": "", **res}


def plan_summary(plan: dict, gpus_source: str | None = None) -> dict:
    """The plan as the report shows it (plain data: it reaches the report rule through params)."""
    return {"gpus": plan["gpus"], "gpus_source": gpus_source or plan["gpus_source"],
            "skipped": [dict(s) for s in plan["skipped"]],
            "world_sizes": plan["world_sizes"], "backends_run": plan["backends_run"],
            "config_world_sizes": plan.get("config_world_sizes"), "world_sizes_auto": plan.get("world_sizes_auto", False),
            # Gloo jobs with more ranks than cores (distbench.pipeline.host_fit): allowed, named
            "oversubscribed": plan.get("oversubscribed", []),
            "jobs": {name: [j.wildcards for j in jobs] for name, jobs in plan["jobs"].items()}}


def nccl_probe_params(config: dict, plan: dict) -> dict:  # noqa: ARG001 - one signature with the other params
    """The NCCL debug probe runs at the largest NCCL world size (world_size 0: nothing to probe, and why),
    with the ops, sizes and job environment a family states for it (the plan's fact `nccl_probe`, a
    NcclProbeWorkload). The world sizes are those a family states per backend (the plan's fact
    `world_sizes`), else those of any family's NCCL jobs: the probe describes NCCL for whichever
    family runs it."""
    # one node: the probe is a torchrun job of its own (distbench.probes.nccl_probe), never multi-node
    nccl = plan["world_sizes"].get("nccl") or [j.world_size for j in all_jobs(plan) if j.backend == "nccl"]
    ws = max([w for w in nccl if w <= plan["gpus"]] or [0])
    why = next((s.why for s in with_reason(plan["skipped"], NO_GPU_FOR_NCCL)), "no NCCL jobs in this config")
    workload = plan.get("nccl_probe") or NcclProbeWorkload()
    return {"world_size": ws, "why": why, **workload.params()}
