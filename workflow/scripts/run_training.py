from distbench.plan import TrainingJob
from distbench.training.job import run_training_job
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
job = TrainingJob(sm.wildcards.backend, int(sm.wildcards.world_size), sm.wildcards.config,
                  sm.params.job["ddp"], sm.params.nccl_env)
with logged(str(sm.log[0]) + ".launcher"):
    # A failed job still leaves its CSV (status failed/skipped), so the rest of the DAG goes on.
    print(f"training job {job.wildcards}: "
          f"{run_training_job(job, sm.params.job, sm.output.csv, sm.output.placement, sm.log[0])}")
