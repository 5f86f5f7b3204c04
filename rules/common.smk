# Config validation and the job plan. The logic lives in the distbench package; this file wires it.
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from distbench.config import ConfigError, SCHEMA_PATH, check_config
from distbench.plan import job_params, make_plan

try:
    # Readable errors first (every bad key, with the allowed values), then Snakemake's own check.
    config.update(check_config(config))
except ConfigError as e:
    raise WorkflowError(str(e))
validate(config, str(SCHEMA_PATH))

PLAN = make_plan(config)
JOBS = {tuple(str(v) for v in j.wildcards.values()): j for j in PLAN["jobs"]}
COMM_DIR = "results/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}"


wildcard_constraints:
    backend="nccl|gloo",
    dtype="[a-z0-9]+",
    world_size=r"\d+",
    nccl_env=r"[A-Za-z0-9_=+.,:^-]+",


def comm_job(wildcards):
    return JOBS[(wildcards.backend, wildcards.dtype, wildcards.world_size, wildcards.nccl_env)]


def comm_csvs(wildcards=None):
    return [f"{COMM_DIR}/comm.csv".format(**j.wildcards) for j in PLAN["jobs"]]


def plan_for_report():
    return {
        "gpus": PLAN["gpus"],
        "gpus_source": PLAN["gpus_source"],
        "skipped": PLAN["skipped"],
        "world_sizes": PLAN["world_sizes"],
        "backends_run": PLAN["backends_run"],
        "jobs": [j.wildcards for j in PLAN["jobs"]],
    }


def nccl_probe_params():
    """The NCCL probe runs at the largest NCCL world size (world_size 0 = nothing to probe)."""
    ws = max(PLAN["world_sizes"].get("nccl") or [0])
    why = next((s["why"] for s in PLAN["skipped"] if s["what"] == "backend nccl"), "no NCCL jobs in this config")
    params = job_params(config, "nccl")
    return {"world_size": ws, "why": why, "ops": params["ops"], "sizes": params["sizes"],
            "job_env": params["job_env"]}
