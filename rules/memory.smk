# One torchrun job per model, configuration (ddp, ddp+gbv, fsdp) and world size: the memory split
# at each batch size, and the largest batch that fits.


rule memory_job:
    input:
        # health.stop_on_failing: after the health check passed (rules/probe.smk)
        unpack(health_gate),
    output:
        csv=job_path("memory", "memory.csv"),
        placement=job_path("memory", "placement.json"),
    log:
        results("logs/memory/{backend}/{model}/ws{world_size}/{config}.log"),
    # Each job's wall time (column s): the estimate printed before a run (distbench.pipeline.estimate).
    benchmark:
        results(FAMILIES["memory"].benchmark)
    conda:
        "../envs/distbench.yaml"
    # All cores: two benchmark jobs must never run at the same time (one would take the other's memory).
    threads: workflow.cores
    # A cluster executor's view of the job (profiles/slurm): its nodes, exclusively, and time.
    resources:
        nodes=cluster_resource("memory", "nodes"),
        tasks=cluster_resource("memory", "tasks"),
        tasks_per_gpu=cluster_resource("memory", "tasks_per_gpu"),
        gres=cluster_resource("memory", "gres"),
        cpus_per_task=cluster_resource("memory", "cpus_per_task"),
        runtime=cluster_resource("memory", "runtime"),
        mem_mb=cluster_resource("memory", "mem_mb"),
        slurm_extra=cluster_resource("memory", "slurm_extra"),
    params:
        launch=launch_param,
        job=lambda wc: memory_params(config, planned_job("memory", wc)),
        strategy=lambda wc: planned_job("memory", wc).strategy,
        gradient_as_bucket_view=lambda wc: planned_job(
            "memory", wc
        ).gradient_as_bucket_view,
    script:
        "../workflow/scripts/run_memory.py"


rule aggregate_memory:
    input:
        jobs=job_files("memory"),
    output:
        raw=results("tables/memory.csv"),
        summary=report(
            results("tables/memory_summary.csv"),
            caption="../workflow/report/memory_summary.rst",
            category="Tables",
            subcategory="Memory",
        ),
    log:
        results("logs/aggregate/memory.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/aggregate_memory.py"


rule plot_memory:
    input:
        raw=results("tables/memory.csv"),
    output:
        report(
            directory(results("figures_memory")),
            patterns=["{figure}.png"],
            caption="../workflow/report/memory_figures.rst",
            category="Memory",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/memory.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_memory.py"


# `snakemake --cores 1 memory`: this family's jobs, tables and figures, nothing else
rule memory:
    input:
        family_target("memory"),
    localrule: True
