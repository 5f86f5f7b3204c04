"""The quick answer (`snakemake --cores 1 quick`): a verdict from a few of the full plan's own jobs.

The quick target runs a SUBSET of the plan's jobs (the same output paths and params), never
configurations of its own: Snakemake reruns a job whose params changed, so only the plan's own jobs
are reused by a later full run (`snakemake --cores 1`) instead of repeated. Torch-free: the Snakefile
calls it when the DAG is built.

Each family chooses its own few (its manifest's `quick` hook, (config, plan, cores) -> the jobs, the
same objects as the plan's), chosen to judge what the Verdict judges at the least cost: e.g. one
backend's jobs at the world size the Verdict judges, a workload's at one rank and at that size; a
family without the hook runs none (the full run adds it, as it adds the predictions and traces).
A Gloo world size whose ranks outnumber the host's cores is a smoke test the Verdict does not judge
(distbench.core.judged.oversubscribed), and it is slow: a family's hook takes the largest world size
that gives each rank a core of its own (the smallest planned if none does), the world size the full
report's Verdict judges too (distbench.launch.planning.quick_world_size).
"""

from __future__ import annotations

import os

from distbench.pipeline.hooks import resolve
from distbench.pipeline.families import manifests


def quick_jobs(plan: dict, config: dict, cores: int | None = None) -> dict:
    """{'jobs': {family: [job]}}: the quick target's jobs of every family with a plan (each one of
    `plan`'s jobs, the same objects; [] for a family without a `quick` hook); `cores`: this host's
    (default os.cpu_count())."""
    cores = cores or os.cpu_count() or 1
    return {"jobs": {m.name: list(resolve(m.quick)(config, plan, cores)) if m.quick else []
                     for m in manifests() if m.name in plan["jobs"]}}


def counted(plan: dict) -> list[str]:
    """The families whose jobs the quick answer counts as planned benchmark jobs: those the time
    estimate counts (their manifests say `estimated`) with jobs in the plan (`plan["jobs"]`: the plan,
    or distbench.pipeline.plan.plan_summary's wildcards)."""
    return [m.name for m in manifests() if m.estimated and m.name in plan["jobs"]]


def quick_summary(plan: dict, quick: dict) -> dict:
    """What the quick report says it stands on: jobs run of planned, per family the estimate counts
    (plain data)."""
    counted_ = counted(plan)
    ran = {f: quick["jobs"].get(f) or [] for f in counted_}
    return {"ran": sum(len(ran[f]) for f in counted_), "planned": sum(len(plan["jobs"][f]) for f in counted_),
            "families": {f: {"ran": [j.wildcards for j in ran[f]], "planned": len(plan["jobs"][f])}
                         for f in counted_}}
