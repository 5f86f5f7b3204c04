# The comm family: one torchrun job per backend/dtype/world size/NCCL setting (every op and size
# inside the job) -> tidy tables -> NCCL's algorithm and the link peak joined in -> figures; the
# GPU-pair matrix (comm.pairs) beside it.


rule comm_job:
    input:
        # health.stop_on_failing: after the health check passed (rules/probe.smk)
        unpack(health_gate),
    output:
        # traces on request (config profile): only while the comm family is profiled
        **trace_output("comm"),
        csv=job_path("comm", "comm.csv"),
        ranks=job_path("comm", "comm_ranks.csv"),
        placement=job_path("comm", "placement.json"),
        # the GPU-pair matrix (comm.pairs): header only for the jobs that do not measure it
        pairs=job_path("comm", "pairs.csv"),
    log:
        results("logs/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.log"),
    # Each job's wall time (column s): the estimate printed before a run (distbench.pipeline.estimate).
    benchmark:
        results(FAMILIES["comm"].benchmark)
    conda:
        "../envs/distbench.yaml"
    # All cores: two benchmark jobs must never run at the same time and disturb each other.
    threads: workflow.cores
    # A cluster executor's view of the job (profiles/slurm): its nodes, exclusively, and time.
    resources:
        nodes=cluster_resource("comm", "nodes"),
        tasks=cluster_resource("comm", "tasks"),
        tasks_per_gpu=cluster_resource("comm", "tasks_per_gpu"),
        gres=cluster_resource("comm", "gres"),
        cpus_per_task=cluster_resource("comm", "cpus_per_task"),
        runtime=cluster_resource("comm", "runtime"),
        mem_mb=cluster_resource("comm", "mem_mb"),
        slurm_extra=cluster_resource("comm", "slurm_extra"),
    params:
        launch=launch_param,
        # Values that shape the measurements: a change reruns exactly the jobs it touches.
        job=lambda wc: job_params(
            config,
            wc.backend,
            wc.nccl_env,
            int(wc.world_size),
            beside_nccl=bool(PLAN["world_sizes"].get("nccl")),
        ),
        nccl_env=lambda wc: planned_job("comm", wc).nccl_env,
        pairs=lambda wc: pairs_job(config, PLAN, planned_job("comm", wc)),
    script:
        "../workflow/scripts/run_comm.py"


# The comm tables, written once: the summary with the probes joined onto every point (% of the link
# peak, NCCL's algorithm per size: distbench.comm.analysis.diagnose) and the advice beside it; the
# report, the prediction, summary.json and the figures read them.
rule aggregate_comm:
    input:
        jobs=job_files("comm"),
        ranks=job_files("comm", "comm_ranks.csv"),
        placement=job_files("comm", "placement.json"),
        env=results("probe/env.json"),
        topology=results("probe/topology.json"),
        nccl=results("probe/nccl.json"),
    output:
        raw=results("tables/comm.csv"),
        ranks=results("tables/comm_ranks.csv"),
        summary=report(
            results("tables/comm_summary.csv"),
            caption="../workflow/report/comm_summary.rst",
            category="Tables",
            subcategory="Communication",
        ),
        largest=report(
            results("tables/comm_largest.csv"),
            caption="../workflow/report/comm_largest.rst",
            category="Tables",
            subcategory="Communication",
        ),
        stragglers=report(
            results("tables/comm_stragglers.csv"),
            caption="../workflow/report/comm_stragglers.rst",
            category="Tables",
            subcategory="Communication",
        ),
        advice=results("tables/comm_advice.json"),
    log:
        results("logs/aggregate/comm.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/aggregate_comm.py"


rule plot_comm:
    input:
        # the summary with NCCL's algorithm/protocol per point (from the NCCL probe's tuning table)
        summary=results("tables/comm_summary.csv"),
        # the link peak (comm_advice.json) and the GPU (env.json): the bus-bandwidth figures' reference lines
        advice=results("tables/comm_advice.json"),
        env=results("probe/env.json"),
    output:
        report(
            directory(results("figures_comm")),
            patterns=["{figure}.png"],
            caption="../workflow/report/comm_figures.rst",
            category="Communication",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/comm.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_comm.py"


# The GPU-pair matrix (comm.pairs): every job's pairs.csv, summarized, with each pair's link class
# from the topology probe.
rule aggregate_pairs:
    input:
        pairs=job_files("comm", "pairs.csv"),
        topology=results("probe/topology.json"),
    output:
        report(
            results("tables/comm_pairs.csv"),
            caption="../workflow/report/comm_pairs.rst",
            category="Tables",
            subcategory="GPU pairs",
        ),
    log:
        results("logs/aggregate/pairs.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/aggregate_pairs.py"


rule plot_pairs:
    input:
        pairs=results("tables/comm_pairs.csv"),
    output:
        report(
            directory(results("figures_pairs")),
            patterns=["{figure}.png"],
            caption="../workflow/report/pairs_figures.rst",
            category="GPU pairs",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/pairs.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_pairs.py"


# `snakemake --cores 1 comm`: this family's jobs, tables and figures, nothing else
rule comm:
    input:
        family_target("comm"),
    localrule: True
