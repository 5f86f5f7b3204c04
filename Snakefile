# distbench: probes -> per-configuration torchrun jobs of every family (rules/families.smk) -> tables -> plots -> report.
#   snakemake --cores 1                         # everything (Gloo on CPU; NCCL where GPUs exist)
#   snakemake --cores 1 --config gpus=6         # declare 6 GPUs per node
#   snakemake --cores 1 report                  # the report from cached tables/CSVs
#   snakemake --cores 1 quick                   # a verdict from a few of the jobs (report/quick.md)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# Every config file Snakemake loaded (config.yaml, --configfile), read again: a key given twice is
# refused with its name (Snakemake's YAML loader silently keeps the last one).
from snakemake.exceptions import WorkflowError
from distbench.pipeline.config import ConfigError, check_config_files

try:
    check_config_files(workflow.configfiles)
except ConfigError as e:
    raise WorkflowError(str(e))

# Every package's manifest and config schema fragment, checked before any rule is built: a bad one is
# named in one line (its file and field), not a traceback from the rule that would first use it.
from distbench.core.manifest import ManifestError
from distbench.pipeline.config import load_schema
from distbench.pipeline.families import manifests

try:
    manifests()
    load_schema()
except ManifestError as e:
    raise WorkflowError(f"distbench error: {e}")


report: "workflow/report/workflow.rst"


include: "rules/common.smk"


# A plan that cannot run on this host stops here, before any job (distbench.pipeline.host_fit); the
# jobs of the families that share launches are listed for them, tied to this invocation, and
# what earlier invocations staged and never adopted is discarded (distbench.launch.batch).
onstart:
    stop_if_unfit()
    stop_report_rerunning_benchmarks()
    plan_batch_launches()


rule all:
    default_target: True
    input:
        "report/report.md",
        "report/report.html",
        "report/summary.json",
        # Each job's result is a target too: deleting one reruns exactly that job (and what reads it).
        all_job_results,
        # and every table and figure of the families this run has
        all_family_outputs,
    localrule: True


# One family (or the probes) at a time: `snakemake --cores 1 <family>` runs that family's jobs and
# their tables and figures, nothing else; `snakemake -n <family>` lists what would run and what is cached.
rule probes:
    input:
        results("probe/env.json"),
        results("probe/topology.json"),
        results("probe/nccl.json"),
    localrule: True


include: "rules/probe.smk"
include: "rules/families.smk"
include: "rules/traces.smk"
include: "rules/report.smk"
include: "rules/quick.smk"
include: "rules/gate.smk"
