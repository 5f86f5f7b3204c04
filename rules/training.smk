# One torchrun job per model, configuration (DDP knobs, or FSDP) and world size; plain DDP on one
# rank is each model's baseline.


rule training_job:
    input:
        # health.stop_on_failing: after the health check passed (rules/probe.smk)
        unpack(health_gate),
    output:
        # traces on request (config profile): only while the training family is profiled
        **trace_output("training"),
        csv=job_path("training", "training.csv"),
        placement=job_path("training", "placement.json"),
    log:
        results("logs/training/{backend}/{model}/ws{world_size}/{config}.log"),
    # Each job's wall time (column s): the estimate printed before a run (distbench.pipeline.estimate).
    benchmark:
        results(FAMILIES["training"].benchmark)
    conda:
        "../envs/distbench.yaml"
    # All cores: two benchmark jobs must never run at the same time and disturb each other.
    threads: workflow.cores
    # A cluster executor's view of the job (profiles/slurm): its nodes, exclusively, and time.
    resources:
        nodes=cluster_resource("training", "nodes"),
        tasks=cluster_resource("training", "tasks"),
        tasks_per_gpu=cluster_resource("training", "tasks_per_gpu"),
        gres=cluster_resource("training", "gres"),
        cpus_per_task=cluster_resource("training", "cpus_per_task"),
        runtime=cluster_resource("training", "runtime"),
        mem_mb=cluster_resource("training", "mem_mb"),
        slurm_extra=cluster_resource("training", "slurm_extra"),
    params:
        launch=launch_param,
        # Values that shape the measurements: a change reruns exactly the jobs it touches.
        job=lambda wc: training_params(config, planned_job("training", wc)),
        nccl_env=lambda wc: planned_job("training", wc).nccl_env,
        strategy=lambda wc: planned_job("training", wc).strategy,
    script:
        "../workflow/scripts/run_training.py"


rule aggregate_training:
    input:
        jobs=job_files("training"),
    output:
        raw=results("tables/training.csv"),
        summary=report(
            results("tables/training_summary.csv"),
            caption="../workflow/report/training_summary.rst",
            category="Tables",
            subcategory="Training",
        ),
    log:
        results("logs/aggregate/training.log"),
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        cost_gpu_hour_usd=config["cost"].get("gpu_hour_usd"),
    script:
        "../workflow/scripts/aggregate_training.py"


rule plot_training:
    input:
        summary=results("tables/training_summary.csv"),
    output:
        report(
            directory(results("figures_training")),
            patterns=["{figure}.png"],
            caption="../workflow/report/training_figures.rst",
            category="Training",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/training.log"),
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_training.py"
