# distbench: probes -> per-configuration torchrun jobs (comm, training, memory) -> tables -> plots -> report.
#   snakemake --cores 1                         # everything (Gloo on CPU; NCCL where GPUs exist)
#   snakemake --cores 1 --config gpus=6         # declare 6 GPUs per node
#   snakemake --cores 1 report                  # the report from cached tables/CSVs
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"


rule all:
    default_target: True
    input:
        "report/report.md",
        "report/report.html",
        # Each job's CSV is a target too: deleting one reruns exactly that job (and what reads it).
        comm_csvs,
        training_csvs,
        memory_csvs,


include: "rules/probe.smk"
include: "rules/comm.smk"
include: "rules/training.smk"
include: "rules/memory.smk"
include: "rules/aggregate.smk"
include: "rules/plot.smk"
include: "rules/report.smk"
