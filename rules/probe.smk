# Probes: what produced the numbers, and NCCL's own account of how it moved them.


# The two probes read the host (no GPU work): they run beside a benchmark job on a GPU node with cores to
# spare (SIDE_THREADS 0), as the aggregates do.
rule probe_env:
    output:
        results("probe/env.json"),
    log:
        results("logs/probe/env.log"),
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    resources:
        nodes=probe_resource("nodes"),
        tasks=probe_resource("tasks"),
        tasks_per_gpu=probe_resource("tasks_per_gpu"),
        gres=probe_resource("gres"),
        cpus_per_task=probe_resource("cpus_per_task"),
        runtime=probe_resource("runtime"),
        mem_mb=probe_resource("mem_mb"),
        slurm_extra=probe_resource("slurm_extra"),
    script:
        "../workflow/scripts/probe_env.py"


rule probe_topology:
    output:
        results("probe/topology.json"),
    log:
        results("logs/probe/topology.log"),
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    resources:
        nodes=probe_resource("nodes"),
        tasks=probe_resource("tasks"),
        tasks_per_gpu=probe_resource("tasks_per_gpu"),
        gres=probe_resource("gres"),
        cpus_per_task=probe_resource("cpus_per_task"),
        runtime=probe_resource("runtime"),
        mem_mb=probe_resource("mem_mb"),
        slurm_extra=probe_resource("slurm_extra"),
    script:
        "../workflow/scripts/probe_topology.py"


# NCCL_DEBUG=INFO slows small messages: this job runs apart from (and never during) timed runs.
rule probe_nccl:
    output:
        json=results("probe/nccl.json"),
        logs=directory(results("probe/nccl_logs")),
    log:
        results("logs/probe/nccl.log"),
    # Its wall time (column s): the estimate printed before a run (distbench.pipeline.estimate).
    benchmark:
        results(PROBE_BENCHMARK)
    # before the benchmark jobs (after health_before's 100): the communication tables wait for its
    # log, and then they are built beside the jobs that follow instead of after the last
    priority: 50
    conda:
        "../envs/distbench.yaml"
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
        probe=nccl_probe_params(config, PLAN),
    script:
        "../workflow/scripts/probe_nccl.py"


# Hardware health (distbench.health.readings): read before the benchmarks and again after them, on
# every node of the run (distbench.health.node: once per node, through the launcher). The
# benchmark jobs wait for the first reading only when health.stop_on_failing is on (health_gate, in
# common.smk); otherwise its priority only starts it first among the jobs ready at the start.
rule health_before:
    output:
        results("health/health_before.csv"),
    log:
        results("logs/health/before.log"),
    priority: 100
    conda:
        "../envs/distbench.yaml"
    resources:
        nodes=health_resource("nodes"),
        tasks=health_resource("tasks"),
        tasks_per_gpu=health_resource("tasks_per_gpu"),
        gres=health_resource("gres"),
        cpus_per_task=health_resource("cpus_per_task"),
        runtime=health_resource("runtime"),
        mem_mb=health_resource("mem_mb"),
        slurm_extra=health_resource("slurm_extra"),
    params:
        phase="before",
        gpus=PLAN["gpus"],
        nodes=health_launch(config, PLAN),
        load_s=config["health"]["load_s"],
    script:
        "../workflow/scripts/probe_health.py"


# health.stop_on_failing: a failing item stops the run here, before any benchmark job, naming it.
rule health_gate:
    input:
        results("health/health_before.csv"),
    output:
        results("health/gate.txt"),
    log:
        results("logs/health/gate.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/health_gate.py"


rule health_after:
    input:
        before=results("health/health_before.csv"),
        # after every benchmark job of the plan
        jobs=all_job_results,
    output:
        after=results("health/health_after.csv"),
        diff=results("health/health_diff.csv"),
    log:
        results("logs/health/after.log"),
    conda:
        "../envs/distbench.yaml"
    resources:
        nodes=health_resource("nodes"),
        tasks=health_resource("tasks"),
        tasks_per_gpu=health_resource("tasks_per_gpu"),
        gres=health_resource("gres"),
        cpus_per_task=health_resource("cpus_per_task"),
        runtime=health_resource("runtime"),
        mem_mb=health_resource("mem_mb"),
        slurm_extra=health_resource("slurm_extra"),
    params:
        phase="after",
        gpus=PLAN["gpus"],
        nodes=health_launch(config, PLAN),
        load_s=config["health"]["after_load_s"],
    script:
        "../workflow/scripts/probe_health.py"
