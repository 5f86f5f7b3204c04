import sys

from distbench.plan import TrainingJob
from distbench.training.job import run_training_job
from distbench.launch import JobInterrupted
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
job = TrainingJob(sm.wildcards.backend, int(sm.wildcards.world_size), sm.wildcards.config,
                  sm.params.job["ddp"], sm.params.nccl_env, sm.wildcards.model, sm.params.strategy)
with logged(str(sm.log[0]) + ".launcher"):
    # A failed job still leaves its CSV (status failed/not_run), so the rest of the DAG goes on; an
    # interrupted one leaves nothing and exits non-zero, so the next run starts it again.
    try:
        print(f"training job {job.wildcards}: "
              f"{run_training_job(job, sm.params.job, sm.output.csv, sm.output.placement, sm.log[0])}")
    except JobInterrupted as e:
        print(f"training job {job.wildcards}: {e.why}")
        sys.exit(e.exit_code)
