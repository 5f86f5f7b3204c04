# Probes: what produced the numbers, and NCCL's own account of how it moved them.


rule probe_env:
    output:
        results("probe/env.json"),
    log:
        results("logs/probe/env.log"),
    conda:
        "../envs/distbench.yaml"
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
