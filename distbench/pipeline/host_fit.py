"""Whether the plan can run on this host, checked before any job starts (rules/common.smk).

Two limits:
- NCCL: every NCCL job needs a GPU per rank. With `gpus` declared (not auto), the GPUs this host
  has are detected too; declaring more than it has would plan NCCL jobs that fail at their first
  line ("backend nccl needs CUDA").
- Gloo: ranks run on CPU cores. Oversubscription rule: up to GLOO_RANKS_PER_CORE ranks per core
  (and never fewer than GLOO_MIN_RANKS ranks in all) run, named in the plan as a smoke test, since
  ranks then time-share the cores (distbench.core.section.oversubscribed marks their rows so);
  beyond that a job is refused: 1,024 ranks on 2 cores would only queue for the cores (and hold a
  Python + torch process each in memory). The default config's Gloo jobs (6 ranks) run on 2 cores.

A plan meant for other machines is not held to this host: cluster.nodes > 1, a cluster executor
(snakemake --profile profiles/slurm) or cluster.other_host: true. A dry run shows the plan with
the problem named (planning for another machine is a use case); a real run stops before its first
job (the Snakefile's onstart hook, where the executor is known).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from distbench.launch.cluster import job_layout
from distbench.pipeline.plan import detect_gpus

GLOO_RANKS_PER_CORE = 4
GLOO_MIN_RANKS = 8


def gloo_rank_limit(cores: int) -> int:
    """The most Gloo ranks one job may put on a host of `cores` cores."""
    return max(GLOO_MIN_RANKS, GLOO_RANKS_PER_CORE * max(cores, 1))


@dataclass(frozen=True)
class HostFit:
    cores: int
    problems: list[str] = field(default_factory=list)  # what cannot run here, and what fits
    oversubscribed: list[str] = field(default_factory=list)  # allowed, named in the plan and report

    def message(self) -> str:
        return ("distbench: this plan cannot run on this host:\n  - " + "\n  - ".join(self.problems)
                + "\nIf the plan is meant for other machines, set cluster.other_host: true (or cluster.nodes > 1, "
                  "or run under a cluster executor: --profile profiles/slurm).")


def _jobs(plan: dict):
    for key in ("comm_jobs", "training_jobs", "memory_jobs"):
        yield from plan.get(key) or []


def host_fit(config: dict, plan: dict, cores: int | None = None, detected: tuple[int, str] | None = None) -> HostFit:
    """The plan against this host's cores and GPUs (`detected`, as distbench.pipeline.plan.detect_gpus
    gives it; looked up only when gpus is declared and NCCL jobs are planned)."""
    cores = cores or os.cpu_count() or 1
    problems, crowded = [], []
    nccl = sorted({j.world_size for j in _jobs(plan) if j.backend == "nccl"})
    if nccl and config["gpus"] != "auto":
        have, how = detected if detected is not None else detect_gpus()
        if int(config["gpus"]) > have:
            fits = "gpus=auto (Gloo only)" if have == 0 else f"gpus={have} or gpus=auto"
            problems.append(f"gpus={config['gpus']} is declared but this host has {have} GPU(s) ({how}): "
                            f"NCCL jobs at world sizes {nccl} would fail here. What fits: {fits}")
    per_host = {}
    for j in _jobs(plan):
        if j.backend == "gloo":
            layout, _ = job_layout(j.world_size, "gloo", plan["gpus"], config["cluster"])
            ranks = layout.ranks_per_node if layout else j.world_size
            per_host.setdefault(ranks, set()).add(j.world_size)
    limit = gloo_rank_limit(cores)
    over = sorted(ws for r, wss in per_host.items() if r > limit for ws in wss)
    if over:
        problems.append(f"Gloo world sizes {over}: more ranks than the {limit} this host's {cores} core(s) run "
                        f"({GLOO_RANKS_PER_CORE} per core, at least {GLOO_MIN_RANKS}). What fits: world sizes up to {limit}")
    for ranks in sorted(r for r in per_host if cores < r <= limit):
        crowded.append(f"Gloo {ranks} ranks on {cores} core(s) (world size {sorted(per_host[ranks])}): oversubscribed, "
                       f"allowed up to {limit} ranks here; a smoke test, scaling not judged")
    return HostFit(cores, problems, crowded)


def other_host_reason(config: dict, cluster_executor: bool) -> str | None:
    """Why the plan is not held to this host (None: it is)."""
    cluster = config["cluster"]
    if cluster.get("other_host"):
        return "cluster.other_host is true"
    if cluster["nodes"] > 1:
        return f"cluster.nodes is {cluster['nodes']}"
    if cluster_executor:
        return "a cluster executor runs the jobs"
    return None
