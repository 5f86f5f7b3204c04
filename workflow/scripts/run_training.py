from distbench.training.plan import TrainingJob
from distbench.training.job import run_training_job
from distbench.pipeline.in_rule import run_job_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# the job's values, and where its ranks run (nodes, launcher: distbench.launch.cluster)
params = {**sm.params.job, "launch": sm.params.launch}
job = TrainingJob(sm.wildcards.backend, int(sm.wildcards.world_size), sm.wildcards.config,
                  params["ddp"], sm.params.nccl_env, sm.wildcards.model, sm.params.strategy)
run_job_in_rule(sm.log[0], f"training job {job.wildcards}",
                lambda: run_training_job(job, params, sm.output.csv, sm.output.placement, sm.log[0]))
