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
from distbench.core.manifest import JobFiles, TableRef
from distbench.pipeline.hooks import resolve
from distbench.pipeline.families import (
    batch_rules,
    figure_dirs,
    job_files as planned_job_files,
    manifests,
    report_tables,
    tables_of,
)
from distbench.launch.dag_view import StopBeforeJobs, planned_jobs, when_planned
from distbench.pipeline.stale import stale_message, stale_reused
from distbench.pipeline.estimate import (
    BENCHMARKS,
    RULE_FAMILIES,
    estimate,
    job_weight,
    launches_alone,
    job_key,
    probe_benchmark,
)
from distbench.pipeline.quick import quick_jobs, quick_summary
from distbench.pipeline.host_fit import host_fit, other_host_reason
from distbench.pipeline.plan import (
    SLURM_RESOURCES,
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
from distbench.launch.batch import plan_shared_launches
from distbench.launch.invocation import begin_invocation
from distbench.launch.pycache import use_pycache
from distbench.pipeline.report_only import missing_message, report_only, rerun_message

# Where the Python environment keeps no bytecode for torch (read-only, or PYTHONDONTWRITEBYTECODE), every
# process of the run (rule scripts, launchers, ranks) shares one bytecode cache instead of compiling torch
# again each time (distbench.launch.pycache: ~6 s per rank that imports torch._dynamo on the lent H200 image).
PYCACHE = use_pycache()
if PYCACHE:
    print(
        "distbench: torch's bytecode is not kept where it is installed (read-only, or PYTHONDONTWRITEBYTECODE); "
        f"this run's processes share a cache in {PYCACHE['PYTHONPYCACHEPREFIX']}",
        file=sys.stderr,
    )

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


def stale_cached_jobs():
    """The jobs Snakemake is about to reuse whose job.json records other values than this config's
    (distbench.pipeline.stale: Snakemake's own record of their params is gone)."""
    return stale_reused(planned_jobs(workflow, RULE_FAMILIES))


def stop_reusing_stale_results():
    """Once the DAG is final, before any job (also where nothing else is to be done, when onstart does
    not run): never report a cached job measured with other values as this config's. The message names
    each job, what differs and the command that reruns exactly them; a dry run only prints it, as does
    `report` alone (it shows cached results as they are), and nothing is said where the user left params
    out of the rerun triggers (--rerun-triggers mtime: values are not to rerun anything).
    """
    if not any(str(t).lower().endswith("params") for t in workflow.rerun_triggers):
        return
    message = stale_message(stale_cached_jobs(), sorted(invocation_targets()))
    if not message:
        return
    if report_only(invocation_targets()):
        print(f"{message}\n`report` alone shows them as they are.", file=sys.stderr)
    elif workflow.dryrun:
        print(f"{message}\nA run stops here, before its first job.", file=sys.stderr)
    else:
        raise StopBeforeJobs(message)


def stop_if_unfit():
    """Before the first job (onstart; the executor is known by then): stop a plan that cannot run
    on this host unless it is meant for other machines."""
    if HOST_FIT.problems and not other_host_reason(config, workflow.non_local_exec):
        raise WorkflowError(HOST_FIT.message())


def plan_batch_launches():
    """Before the first job (onstart): this invocation's jobs of the families that share launches (their
    manifests' shares_launches: distbench.launch.batch); none under a cluster executor or with
    batch_launch false.
    """
    plan_shared_launches(
        workflow,
        results(""),
        config["batch_launch"] and not workflow.non_local_exec,
        batch_rules(),
    )


# The families (distbench.pipeline.families: one manifest each, distbench/<family>/manifest.py): their
# job directories, job files, tables and figures are read from there, not written out here.
FAMILIES = {m.name: m for m in manifests()}
# The jobs of each family the plan holds (PLAN["jobs"]), by their wildcards' values.
PLANNED = {
    name: {
        tuple(str(j.wildcards[k]) for k in FAMILIES[name].job_fields): j for j in jobs
    }
    for name, jobs in PLAN["jobs"].items()
}
# Traces on request (config `profile`, per family whose manifest says `traced`): torch or nsys.
PROFILE = {name: family_mode(config, name) for name, m in FAMILIES.items() if m.traced}
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
            # an inspected, traced or multi-node job launches alone (launches_alone): its own launch cost;
            # a larger model measures longer than its family's default job (job_weight)
            jobs.append((key, runs, launches_alone(job), job_weight(job)))
    # shared launches as the onstart plans them (plan_batch_launches): none under a cluster executor
    estimated = estimate(
        jobs,
        "results",
        PLAN["gpus"],
        config["batch_launch"] and not workflow.non_local_exec,
    )
    print(estimated.message(), file=sys.stderr)


if workflow.is_main_process:
    # this invocation's id, for its shared launches (distbench.launch.batch): its jobs inherit it
    begin_invocation()
    when_planned(announce_plan_now)
    when_planned(stop_reusing_stale_results)


wildcard_constraints:
    backend="|".join(BACKENDS),
    dtype="|".join(DTYPES),
    world_size=r"\d+",
    model="|".join(WORKLOADS),
    nccl_env=r"[A-Za-z0-9_=+.,:^-]+",
    config=r"[A-Za-z0-9_=+.,:^-]+",


def job_path(family, name=None):
    """A job's file (default: its result) as a rule's output: results/<label>/<job dir>/<name>."""
    return results(FAMILIES[family].job_file(name))


def planned_job(family, wildcards):
    """The plan's job a rule's wildcards name."""
    m = FAMILIES[family]
    return PLANNED[family][tuple(str(wildcards[k]) for k in m.job_fields)]


def job_files(family, name=None, plan=None):
    """An input function: a file (default: the result) of every job of the family in the plan."""
    return lambda wildcards=None: [
        results(p) for p in planned_job_files(FAMILIES[family], plan or PLAN, name)
    ]


def all_family_outputs(wildcards=None):
    """Every table and figure directory of the families this run has: targets of `all` (also those
    no report section reads, such as the nccl-tests documents)."""
    return [p for m in FAMILIES.values() for p in family_outputs(m.name)]


def all_job_results(wildcards=None):
    """Every planned job's result: targets of `all` (deleting one reruns exactly that job)."""
    return [
        results(p)
        for m in FAMILIES.values()
        if m.plan
        for p in planned_job_files(m, PLAN)
    ]


def table_input(name):
    """An input function: {name: path} of one table, when this run writes it (else nothing)."""
    return lambda wildcards=None: {
        t.name: results(t.path)
        for t in report_tables(config, PLAN).values()
        if t.name == name
    }


def family_outputs(family):
    """A family's tables and figures for its target rule; none when this run does not have it (the
    target then does nothing, and the plan section of the report says why)."""
    m = FAMILIES[family]
    return [results(t.path.rstrip("/")) for t in tables_of(m, config, PLAN)] + [
        results(f.path)
        for f in m.figures
        if m.active(config, PLAN) and (f.when is None or f.when(config, PLAN))
    ]


def family_target(family):
    """`snakemake --cores 1 <family>`: its jobs, tables and figures, nothing else."""
    return lambda wildcards=None: job_files(family)() + family_outputs(family)


def probe_resource(key):
    """One resource a probe asks a cluster executor for: a GPU node of its own."""
    return lambda wc: probe_resources(config, PLAN)[key]


def health_resource(key):
    """One resource the health check asks a cluster executor for: every node it reads."""
    return lambda wc: health_resources(config, PLAN)[key]


def trace_jobs(wildcards=None):
    """{trace directory: its family and job} of every profiled job of the plan."""
    out = {}
    for family, mode in PROFILE.items():
        if mode != "off":
            for path in job_files(family, "trace")():
                out[path] = {
                    "family": family,
                    "job": os.path.relpath(os.path.dirname(path), results(family)),
                }
    return out


def trace_dirs(wildcards=None):
    return list(trace_jobs())


def job_placements(wildcards=None):
    """Every benchmark job's placement file (it carries the job's provenance: commit, host, dates),
    for the report's cache state and the health check's affected jobs."""
    return [
        p
        for m in FAMILIES.values()
        if m.plan and "placement.json" in m.job_files
        for p in job_files(m.name, "placement.json")()
    ]


def report_inputs(wildcards=None):
    """The report's tables by name (distbench.core.section.ReportInputs.tables): every table of the
    families this run has that the report reads. A table marked optional_cached is left out when
    `report` alone runs without it cached (the report says it was not made)."""
    out = {}
    for name, t in report_tables(config, PLAN).items():
        path = results(t.path)
        if t.optional_cached and report_only(invocation_targets()):
            if not os.path.exists(path):
                continue
        out[name] = path
    return out


def report_figures(wildcards=None):
    """The figure directories of the families this run has."""
    return [results(d) for d in figure_dirs(config, PLAN)]


def full_tables(wildcards=None):
    """The tables copied beside the report (linked from the Markdown, collapsed in the HTML)."""
    return [
        results(t.path) for t in report_tables(config, PLAN).values() if t.beside_report
    ]


def summary_inputs(wildcards=None):
    """summary.json's tables by name: the report's tables whose manifest says summary_json (those its
    families' summary parts read), when this run has them."""
    tables = report_tables(config, PLAN)
    return {
        name: path
        for name, path in report_inputs().items()
        if tables[name].summary_json
    }


def other_runs(wildcards=None):
    """Other hosts' runs copied into results/ (their tables and run.json): inputs of the report, so
    copying one in makes `snakemake report` render it."""
    names = {t.path for m in FAMILIES.values() for t in m.tables if t.report}
    return sorted(
        p
        for label in glob.glob("results/*")
        if os.path.basename(label) != RUN_LABEL
        for p in glob.glob(os.path.join(label, "tables", "*.csv"))
        if os.path.relpath(p, label) in names
    )


# The quick answer (rules/quick.smk): a few of the full plan's own jobs (distbench.pipeline.quick).
QUICK = quick_jobs(PLAN, config)
QUICK_TABLES = results("quick/tables")


def quick_tables(wildcards=None):
    """{table name: path} of the quick answer: the tables of every step marked quick, of the families
    the quick target runs jobs of."""
    return {
        what: f"{QUICK_TABLES}/{os.path.basename(m.output_path(what))}"
        for m in FAMILIES.values()
        if QUICK["jobs"].get(m.name)
        for s in m.steps
        if s.quick
        for what in s.outputs.values()
        if m.table(what).report
    }


# Before the first job: what a family has to say about its plan (its manifest's `announce`: e.g. the
# node rounds' time on paper at larger node counts).
if workflow.is_main_process:
    for _m in FAMILIES.values():
        _said = resolve(_m.announce)(config, PLAN) if _m.announce else None
        if _said:
            print(_said, file=sys.stderr)


# `snakemake report` alone draws the report from cached results and never starts a benchmark.
def report_from_cache(wildcards=None):
    """An input function of `report` (the targets are known once the DAG is built); with
    `report` the only target, stop before any job when a benchmark job or probe has no cached
    result, and say what to run first. Other targets (the default `all`, a family) run them.
    """
    if not report_only(invocation_targets()):
        return {}
    needed = list(
        dict.fromkeys(
            [results(p) for m in FAMILIES.values() for p in m.cached]
            + [
                results(p)
                for m in FAMILIES.values()
                if m.job_rule
                for p in planned_job_files(m, PLAN)
            ]
        )
    )
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        raise WorkflowError(missing_message(missing, len(needed), RUN_LABEL))
    return {}


# The hardware health check (rules/probe.smk).
def health_gate(wildcards=None):
    """A benchmark job's input: the gate, when a failing item is to stop the run. ancient(): a new
    reading that passes does not rerun the cached jobs."""
    if not (config["health"]["enabled"] and config["health"]["stop_on_failing"]):
        return {}
    return {"health_gate": ancient(results("health/gate.txt"))}


# The input functions of the rules every family gets from its manifest (rules/families.smk).
include: "family_inputs.smk"
