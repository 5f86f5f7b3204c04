"""The quick answer (`snakemake --cores 1 quick`): a verdict from a few of the full plan's own jobs.

The quick target runs a SUBSET of the plan's jobs (the same output paths and params), never
configurations of its own: Snakemake reruns a job whose params changed, so only the plan's own jobs
are reused by a later full run (`snakemake --cores 1`) instead of repeated. Torch-free: the Snakefile
calls it when the DAG is built.

The subset, chosen to judge what the Verdict judges at the least cost:
- the comm jobs of the first backend the plan runs (NCCL where GPUs exist, else Gloo) at one world
  size: the headline's (its largest), every dtype and NCCL setting the plan has there;
- the training jobs of one workload (seed 004's MLP, plain DDP: the cheapest that judges scaling) at
  one rank (the efficiency baseline) and at that largest world size;
- no memory search, predictions or traces (the full run adds them).
A Gloo world size whose ranks outnumber the host's cores is a smoke test the Verdict does not judge
(distbench.core.judged.oversubscribed), and it is slow: the quick answer takes the largest world size
that gives each rank a core of its own (the smallest planned if none does), the world size the full
report's Verdict judges too (distbench.core.judged.judged_world_size).
"""

from __future__ import annotations

import os

from distbench.core.judged import judged_world_size, oversubscribed
from distbench.pipeline.plan import layout_of

QUICK_MODEL = "mlp"
QUICK_CONFIG = "plain"


def _judged(config: dict, plan: dict, backend: str, sizes: list[int], cores: int) -> int:
    """The world size of `sizes` the Verdict judges on this host: the rule its headlines apply to the
    full run's tables (distbench.core.judged), so both judge the same rows."""
    env = {"cpu_count": cores}  # what the probe's env.json will say of this host
    return judged_world_size(sizes, lambda ws: oversubscribed(layout_of(config, plan, backend, ws).ranks_per_node,
                                                              backend, env))


def quick_jobs(plan: dict, config: dict, cores: int | None = None) -> dict:
    """{'comm_jobs', 'training_jobs', 'memory_jobs'}: the quick target's jobs, each one of `plan`'s
    (the same objects); `cores`: this host's (default os.cpu_count())."""
    cores = cores or os.cpu_count() or 1
    comm = []
    if plan["comm_jobs"]:
        backend = plan["comm_jobs"][0].backend  # config order: NCCL first where it runs
        of = [j for j in plan["comm_jobs"] if j.backend == backend]
        ws = _judged(config, plan, backend, sorted({j.world_size for j in of}), cores)
        comm = [j for j in of if j.world_size == ws]
    training = []
    tjobs = [j for j in plan["training_jobs"] if j.config_label == QUICK_CONFIG]
    if tjobs:
        model = QUICK_MODEL if any(j.model == QUICK_MODEL for j in tjobs) else tjobs[0].model
        of = [j for j in tjobs if j.model == model]
        multi = sorted({j.world_size for j in of if j.world_size > 1})
        sizes = {1, _judged(config, plan, of[0].backend, multi, cores)} if multi else {1}
        training = [j for j in of if j.world_size in sizes]
    return {"comm_jobs": comm, "training_jobs": training, "memory_jobs": []}


FAMILIES = ("comm_jobs", "training_jobs", "memory_jobs")


def quick_summary(plan: dict, quick: dict) -> dict:
    """What the quick report says it stands on: jobs run of planned, per family (plain data)."""
    return {"ran": sum(len(quick[f]) for f in FAMILIES), "planned": sum(len(plan[f]) for f in FAMILIES),
            "families": {f.removesuffix("_jobs"): {"ran": [j.wildcards for j in quick[f]], "planned": len(plan[f])}
                         for f in FAMILIES}}
