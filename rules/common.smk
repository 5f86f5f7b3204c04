# Config validation and the job plan. The logic lives in the distbench package; this file wires it.
import glob
import os
import sys

from snakemake.exceptions import WorkflowError

from distbench.core.choices import BACKENDS, DTYPES
from distbench.workloads.registry import WORKLOADS
from distbench.pipeline.config import ConfigError, check_config
from distbench.launch.profiling import family_mode
from distbench.core.run_label import resolve_label
from distbench.comm.plan import job_params, pairs_job
from distbench.memory.plan import memory_params
from distbench.launch.dag_view import planned_jobs, when_planned
from distbench.pipeline.estimate import (
    BENCHMARKS,
    RULE_FAMILIES,
    estimate,
    job_key,
    probe_benchmark,
)
from distbench.pipeline.quick import quick_jobs, quick_summary
from distbench.pipeline.host_fit import host_fit, other_host_reason
from distbench.pipeline.plan import (
    health_launch,
    health_resources,
    job_launch,
    job_resources,
    make_plan,
    nccl_probe_params,
    probe_resources,
    plan_summary,
    side_threads,
)
from distbench.training.plan import training_params
from distbench.launch.batch import plan_shared_launches
from distbench.launch.invocation import begin_invocation
from distbench.pipeline.report_only import report_only, rerun_message

try:
    # Readable errors (every bad key, with the allowed values), then snakemake.utils.validate
    # against distbench/pipeline/config.schema.yaml, which fills in the defaults.
    config.update(check_config(config))
except ConfigError as e:
    raise WorkflowError(str(e))

# This run's name: every path it writes is under results/<label>/ (distbench.report.runs), so runs of
# several hosts copied into one results/ sit side by side in the report.
try:
    RUN_LABEL = resolve_label(config["run_label"])
except ValueError as e:
    raise WorkflowError(str(e))


def results(path):
    """A path under this run's results/<run label>/ (wildcards in `path` stay wildcards)."""
    return f"results/{RUN_LABEL}/{path}"


PLAN = make_plan(config)
# The steps that only read tables run beside a benchmark job on a GPU node with cores to spare
# (threads 0), one after another elsewhere (distbench.pipeline.plan.side_threads).
SIDE_THREADS = side_threads(PLAN, len(os.sched_getaffinity(0)))
# world_sizes: auto, resolved on this host's GPUs (distbench.launch.planning.auto_world_sizes): the
# jobs' params and the report read the list the plan used.
config["world_sizes"] = PLAN["config_world_sizes"]
# The plan against this host (distbench.pipeline.host_fit): Gloo jobs with more ranks than cores are
# allowed up to a limit and named in the plan; a plan that cannot run here is named now (a dry run
# shows it) and stops a real run before its first job (stop_if_unfit, the Snakefile's onstart).
HOST_FIT = host_fit(config, PLAN)
PLAN["oversubscribed"] = HOST_FIT.oversubscribed
if (
    workflow.is_main_process
    and HOST_FIT.problems
    and not other_host_reason(config, False)
):
    print(
        HOST_FIT.message()
        + "\nA dry run shows the plan; a run stops before its first job.",
        file=sys.stderr,
    )


def invocation_targets():
    """The targets of this Snakemake invocation (known once the DAG is built)."""
    return set(workflow.dag_settings.targets or ()) if workflow.dag_settings else set()


def stop_report_rerunning_benchmarks():
    """Before the first job (onstart): `report` alone never starts a benchmark job, also not one
    whose cached result Snakemake finds out of date (distbench.pipeline.report_only)."""
    if not report_only(invocation_targets()):
        return
    jobs = [
        (j.rule.name, str(workflow.dag.reason(j))) for j in workflow.dag.needrun_jobs()
    ]
    message = rerun_message(jobs)
    if message:
        raise WorkflowError(message)


def stop_if_unfit():
    """Before the first job (onstart; the executor is known by then): stop a plan that cannot run
    on this host unless it is meant for other machines."""
    if HOST_FIT.problems and not other_host_reason(config, workflow.non_local_exec):
        raise WorkflowError(HOST_FIT.message())


def plan_batch_launches():
    """Before the first job (onstart): this invocation's training and memory jobs, for their shared
    launches (distbench.launch.batch); none under a cluster executor or with batch_launch false.
    """
    plan_shared_launches(
        workflow, results(""), config["batch_launch"] and not workflow.non_local_exec
    )


COMM_JOBS = {tuple(str(v) for v in j.wildcards.values()): j for j in PLAN["comm_jobs"]}
COMM_DIR = results("comm/{backend}/{dtype}/ws{world_size}/{nccl_env}")
TRAINING_JOBS = {
    (j.backend, j.model, str(j.world_size), j.config_label): j
    for j in PLAN["training_jobs"]
}
TRAINING_DIR = results("training/{backend}/{model}/ws{world_size}/{config}")
MEMORY_JOBS = {
    (j.backend, j.model, str(j.world_size), j.config_label): j
    for j in PLAN["memory_jobs"]
}
MEMORY_DIR = results("memory/{backend}/{model}/ws{world_size}/{config}")
# Traces on request (config `profile`, per family): off, torch or nsys (distbench.launch.profiling).
PROFILE = {family: family_mode(config, family) for family in ("comm", "training")}
# The NCCL probe is a torchrun job of its own at this world size (0: none on this plan).
PROBE_WORLD_SIZE = nccl_probe_params(config, PLAN)["world_size"]
PROBE_BENCHMARK = probe_benchmark(PROBE_WORLD_SIZE)


# Before the first job: how many benchmark jobs this invocation runs and about how long (from the job
# times of earlier runs, else stated defaults). Which jobs, and which of them run, is Snakemake's own
# answer: its DAG's benchmark jobs and its rerun decisions (params, input digests, missing outputs),
# known once the DAG is final (distbench.launch.dag_view.when_planned: a dry run included, and
# --no-hooks, where onstart does not run). Only in the main Snakemake process: a cluster executor's job
# re-parses this file in a process of its own (exec mode remote/subprocess). `report` alone runs no
# benchmark job (rules/report.smk): nothing to announce.
def announce_plan_now():
    if report_only(invocation_targets()):
        return
    jobs = []
    for job, runs in planned_jobs(workflow, RULE_FAMILIES):
        key = job_key(job.rule.name, job.wildcards, PROBE_WORLD_SIZE)
        if key is not None:
            jobs.append((key, runs))
    estimated = estimate(jobs, "results", PLAN["gpus"], config["batch_launch"])
    print(estimated.message(), file=sys.stderr)


if workflow.is_main_process:
    # this invocation's id, for its shared launches (distbench.launch.batch): its jobs inherit it
    begin_invocation()
    when_planned(announce_plan_now)


wildcard_constraints:
    backend="|".join(BACKENDS),
    dtype="|".join(DTYPES),
    world_size=r"\d+",
    model="|".join(WORKLOADS),
    nccl_env=r"[A-Za-z0-9_=+.,:^-]+",
    config=r"[A-Za-z0-9_=+.,:^-]+",


def comm_job(wildcards):
    return COMM_JOBS[
        (wildcards.backend, wildcards.dtype, wildcards.world_size, wildcards.nccl_env)
    ]


def comm_csvs(wildcards=None):
    return [f"{COMM_DIR}/comm.csv".format(**j.wildcards) for j in PLAN["comm_jobs"]]


def comm_rank_csvs(wildcards=None):
    return [
        f"{COMM_DIR}/comm_ranks.csv".format(**j.wildcards) for j in PLAN["comm_jobs"]
    ]


def comm_placements(wildcards=None):
    return [
        f"{COMM_DIR}/placement.json".format(**j.wildcards) for j in PLAN["comm_jobs"]
    ]


def training_job(wildcards):
    return TRAINING_JOBS[
        (wildcards.backend, wildcards.model, wildcards.world_size, wildcards.config)
    ]


def training_csvs(wildcards=None):
    return [
        f"{TRAINING_DIR}/training.csv".format(**j.wildcards)
        for j in PLAN["training_jobs"]
    ]


def training_report_inputs(wildcards=None):
    """The training tables and figures, when the plan has training jobs."""
    if not PLAN["training_jobs"]:
        return {}
    return {
        "training_summary": results("tables/training_summary.csv"),
        "training_figures": results("figures_training"),
    }


def memory_job(wildcards):
    return MEMORY_JOBS[
        (wildcards.backend, wildcards.model, wildcards.world_size, wildcards.config)
    ]


def memory_csvs(wildcards=None):
    return [
        f"{MEMORY_DIR}/memory.csv".format(**j.wildcards) for j in PLAN["memory_jobs"]
    ]


def memory_report_inputs(wildcards=None):
    """The memory tables and figures, when the plan has memory jobs."""
    if not PLAN["memory_jobs"]:
        return {}
    return {
        "memory_raw": results("tables/memory.csv"),
        "memory_summary": results("tables/memory_summary.csv"),
        "memory_figures": results("figures_memory"),
    }


def family_outputs(family):
    """A family's tables and figures for its target rule; none when the plan has no jobs of it
    (the target then does nothing, and the plan section of the report says why)."""
    if not PLAN[f"{family}_jobs"]:
        return []
    figures = (
        results("figures_training")
        if family == "training"
        else results("figures_memory")
    )
    return [results(f"tables/{family}_summary.csv"), figures]


def launch_param(wildcards):
    """A benchmark rule's `launch` param: the job's nodes, ranks per node and launcher."""
    return job_launch(config, PLAN, wildcards.backend, int(wildcards.world_size))


def cluster_resource(family, job_fn, key):
    """One resource a benchmark job asks a cluster executor for (profiles/slurm)."""
    return lambda wc: job_resources(config, PLAN, family, job_fn(wc))[key]


def probe_resource(key):
    """One resource a probe asks a cluster executor for: a GPU node of its own."""
    return lambda wc: probe_resources(config, PLAN)[key]


def health_resource(key):
    """One resource the health check asks a cluster executor for: every node it reads."""
    return lambda wc: health_resources(config, PLAN)[key]


def training_summary_input(wildcards=None):
    """The training summary, for the prediction of training at scale, when the plan trains."""
    if not PLAN["training_jobs"]:
        return {}
    return {"training_summary": results("tables/training_summary.csv")}


def predict_report_inputs(wildcards=None):
    """The prediction's tables and figures, unless predict.enabled is false."""
    if not config["predict"]["enabled"]:
        return {}
    return {
        "predict_validation": results("tables/predict/prediction_validation.csv"),
        "predict_figures": results("figures_predict"),
    }


def comm_pairs_csvs(wildcards=None):
    return [f"{COMM_DIR}/pairs.csv".format(**j.wildcards) for j in PLAN["comm_jobs"]]


def pairs_report_inputs(wildcards=None):
    """The GPU-pair matrix's table and heat maps, when comm.pairs is on."""
    if not config["comm"]["pairs"]:
        return {}
    return {
        "pairs_table": results("tables/comm_pairs.csv"),
        "pairs_figures": results("figures_pairs"),
    }


def trace_output(family, job_dir):
    """A job's trace directory, as an output only while its family is profiled: a run that never
    profiles has none (turning profiling on or off reruns the family's jobs once)."""
    return {"trace": directory(f"{job_dir}/trace")} if PROFILE[family] != "off" else {}


def trace_jobs(wildcards=None):
    """{trace directory: its family and job} of every profiled job of the plan."""
    out = {}
    for family, jobs, job_dir in (
        ("comm", PLAN["comm_jobs"], COMM_DIR),
        ("training", PLAN["training_jobs"], TRAINING_DIR),
    ):
        if PROFILE[family] != "off":
            for j in jobs:
                path = job_dir.format(**j.wildcards)
                out[f"{path}/trace"] = {
                    "family": family,
                    "job": path.removeprefix(results(f"{family}/")),
                }
    return out


def trace_dirs(wildcards=None):
    return list(trace_jobs())


def trace_report_inputs(wildcards=None):
    """The traces' overlap table, when a family is profiled."""
    if all(mode == "off" for mode in PROFILE.values()):
        return {}
    return {"traces": results("tables/trace_overlap.csv")}


def job_placements(wildcards=None):
    """Every benchmark job's placement file (it carries the job's provenance: commit, host, dates),
    for the report's cache state."""
    return (
        [f"{COMM_DIR}/placement.json".format(**j.wildcards) for j in PLAN["comm_jobs"]]
        + [
            f"{TRAINING_DIR}/placement.json".format(**j.wildcards)
            for j in PLAN["training_jobs"]
        ]
        + [
            f"{MEMORY_DIR}/placement.json".format(**j.wildcards)
            for j in PLAN["memory_jobs"]
        ]
    )


def other_runs(wildcards=None):
    """Other hosts' runs copied into results/ (their comm tables and run.json): inputs of the report,
    so copying one in makes `snakemake report` render it."""
    return sorted(
        p
        for p in glob.glob("results/*/tables/comm_summary.csv")
        if p.split("/")[1] != RUN_LABEL
    )


# The quick answer (rules/quick.smk): a few of the full plan's own jobs (distbench.pipeline.quick).
QUICK = quick_jobs(PLAN, config)
QUICK_TABLES = results("quick/tables")


def quick_comm(name):
    return lambda wc: [
        f"{COMM_DIR}/{name}".format(**j.wildcards) for j in QUICK["comm_jobs"]
    ]


def quick_training_inputs(wildcards=None):
    if not QUICK["training_jobs"]:
        return {}
    return {"training_summary": f"{QUICK_TABLES}/training_summary.csv"}


# `snakemake report` alone draws the report from cached results and never starts a benchmark.
def report_from_cache(wildcards=None):
    """An input function of `report` (the targets are known once the DAG is built); with
    `report` the only target, stop before any job when a benchmark job or probe has no cached
    result, and say what to run first. Other targets (the default `all`, a family) run them.
    """
    if not report_only(invocation_targets()):
        return {}
    needed = [
        *(results(f"probe/{p}.json") for p in ("env", "topology", "nccl")),
        *comm_csvs(),
        *training_csvs(),
        *memory_csvs(),
        *nodes_csvs(),
    ]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        raise WorkflowError(
            f"distbench: `snakemake report` rebuilds the report from cached results and starts no "
            f"benchmark, but {len(missing)} of the {len(needed)} benchmark jobs and probes of this plan "
            f"have no cached result under results/{RUN_LABEL}/ (e.g. {missing[0]}). Run them first: "
            "`snakemake --cores 1` (everything, the report included), or a family: "
            "`snakemake --cores 1 comm`, then `snakemake --cores 1 report`."
        )
    return {}


# The hardware health check (rules/probe.smk).
def health_gate(wildcards=None):
    """A benchmark job's input: the gate, when a failing item is to stop the run. ancient(): a new
    reading that passes does not rerun the cached jobs."""
    if not (config["health"]["enabled"] and config["health"]["stop_on_failing"]):
        return {}
    return {"health_gate": ancient(results("health/gate.txt"))}


def health_report_inputs(wildcards=None):
    """The readings' differences (health_before/after.csv beside it), unless health.enabled is false
    or `report` alone runs without them cached (it takes no readings: the report says none was taken).
    """
    if not config["health"]["enabled"]:
        return {}
    if report_only(invocation_targets()) and not os.path.exists(
        results("health/health_diff.csv")
    ):
        return {}
    return {"health": results("health/health_diff.csv")}
