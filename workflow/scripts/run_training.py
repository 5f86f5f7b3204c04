from distbench.launch.batch import entry_of, results_dir_of, run_job
from distbench.launch.joblock import held
from distbench.pipeline.estimate import OUTPUTS
from distbench.pipeline.in_rule import run_job_in_rule
from distbench.training.job import batch_family, job_of, run_training_job

sm = snakemake  # noqa: F821 - injected by Snakemake
me = entry_of(sm)  # the job as the rule sees it: wildcards, params (its values, and where its ranks run)
job, params = job_of(me)
what = f"training job {job.wildcards}"
alone = lambda: run_training_job(job, params, sm.output.csv, sm.output.placement, sm.log[0])  # noqa: E731
# one measurement at a time on this host (config host_lock), taken before the job's time limit starts; an
# inspected job (training.inspect) launches alone: its NCCL environment (Inspector, TUNING logs) is its own,
# and NCCL reads it when the communicator starts (distbench.launch.batch.batchable leaves it out too)
run_job_in_rule(sm.log[0], what, held(sm, what, alone if params.get("inspect") else lambda: run_job(
    me, results_dir_of(sm.output.csv, OUTPUTS["training"]), batch_family(), alone=alone)))
