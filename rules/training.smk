# One torchrun job per model, configuration (DDP knobs, or FSDP) and world size; plain DDP on one
# rank is each model's baseline.


rule training_job:
    input:
        # health.stop_on_failing: after the health check passed (rules/probe.smk)
        unpack(health_gate),
        # training.matmul_sweep: the sweep loads every GPU, so it runs before the jobs, never beside one
        unpack(matmul_before_jobs),
    output:
        # traces on request (config profile): only while the training family is profiled
        **trace_output("training"),
        # training.inspect: the job's in-step record (distbench.training.inspect)
        **inspect_output(),
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
    localrule: True
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
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_training.py"


# training.matmul_sweep (issue 40): the achievable matmul peak of each GPU, with the models' own GEMMs
# in their dtype (distbench.training.matmul); planned only where training runs on GPUs (on CPU the
# plan names it as skipped: a CPU has no spec peak to set it beside).
rule training_matmul:
    input:
        unpack(health_gate),
    output:
        results("tables/training_matmul.csv"),
    log:
        results("logs/training/matmul.log"),
    conda:
        "../envs/distbench.yaml"
    # the whole host: nothing else may load the GPUs while they are timed
    threads: workflow.cores
    resources:
        nodes=probe_resource("nodes"),
        tasks=probe_resource("tasks"),
        tasks_per_gpu=probe_resource("tasks_per_gpu"),
        gres=probe_resource("gres"),
        cpus_per_task=probe_resource("cpus_per_task"),
        runtime=probe_resource("runtime"),
        mem_mb=probe_resource("mem_mb"),
        slurm_extra=probe_resource("slurm_extra"),
    params:
        sweep=lambda wc: matmul_params(config, PLAN["training_jobs"]),
    script:
        "../workflow/scripts/run_matmul.py"


# training.inspect (issue 40): every multi-rank job's collectives inside its timed steps, beside the
# comm family's standalone figures, and its step split in four parts (distbench.traces.instep_summary).
rule aggregate_training_instep:
    input:
        unpack(table_input("comm_summary")),
        unpack(table_input("training_matmul")),
        inspect=job_files("training", "inspect"),
        summary=results("tables/training_summary.csv"),
    output:
        instep=results("tables/training_instep.csv"),
        split=results("tables/training_split.csv"),
    log:
        results("logs/aggregate/training_instep.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/aggregate_instep.py"


# `snakemake --cores 1 training`: this family's jobs, tables and figures, nothing else
rule training:
    input:
        family_target("training"),
    localrule: True
