# One torchrun job per backend/dtype/world size/NCCL setting; every op and size inside the job.


rule comm_job:
    output:
        csv=f"{COMM_DIR}/comm.csv",
        placement=f"{COMM_DIR}/placement.json",
    log:
        "results/logs/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.log",
    params:
        # Values that shape the measurements: a change reruns exactly the jobs it touches.
        job=lambda wc: job_params(config, wc.backend, wc.nccl_env),
        nccl_env=lambda wc: comm_job(wc).nccl_env,
    # All cores: two benchmark jobs must never run at the same time and disturb each other.
    threads: workflow.cores
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/run_comm.py"
