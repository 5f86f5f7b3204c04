# One torchrun job per backend/dtype/world size/NCCL setting; every op and size inside the job.


rule comm_job:
    output:
        # traces on request (config profile): only while the comm family is profiled
        **trace_output("comm", COMM_DIR),
        csv=f"{COMM_DIR}/comm.csv",
        ranks=f"{COMM_DIR}/comm_ranks.csv",
        placement=f"{COMM_DIR}/placement.json",
        # the GPU-pair matrix (comm.pairs): header only for the jobs that do not measure it
        pairs=f"{COMM_DIR}/pairs.csv",
    log:
        results("logs/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.log"),
    conda:
        "../envs/distbench.yaml"
    # All cores: two benchmark jobs must never run at the same time and disturb each other.
    threads: workflow.cores
    # A cluster executor's view of the job (profiles/slurm): its nodes, exclusively, and time.
    resources:
        nodes=cluster_resource("comm", comm_job, "nodes"),
        tasks=cluster_resource("comm", comm_job, "tasks"),
        tasks_per_gpu=cluster_resource("comm", comm_job, "tasks_per_gpu"),
        gres=cluster_resource("comm", comm_job, "gres"),
        cpus_per_task=cluster_resource("comm", comm_job, "cpus_per_task"),
        runtime=cluster_resource("comm", comm_job, "runtime"),
        mem_mb=cluster_resource("comm", comm_job, "mem_mb"),
        slurm_extra=cluster_resource("comm", comm_job, "slurm_extra"),
    params:
        launch=launch_param,
        # Values that shape the measurements: a change reruns exactly the jobs it touches.
        job=lambda wc: job_params(config, wc.backend, wc.nccl_env),
        nccl_env=lambda wc: comm_job(wc).nccl_env,
        pairs=lambda wc: pairs_job(config, PLAN, comm_job(wc)),
    script:
        "../workflow/scripts/run_comm.py"
