from distbench.launch.batch import entry_of, results_dir_of, run_job
from distbench.launch.joblock import held
from distbench.pipeline.estimate import OUTPUTS
from distbench.pipeline.in_rule import run_job_in_rule
from distbench.training.job import batch_family, job_of, run_training_job

sm = snakemake  # noqa: F821 - injected by Snakemake
me = entry_of(sm)  # the job as the rule sees it: wildcards, params (its values, and where its ranks run)
job, params = job_of(me)
what = f"training job {job.wildcards}"
# one measurement at a time on this host (config host_lock), taken before the job's time limit starts
run_job_in_rule(sm.log[0], what, held(sm, what, lambda: run_job(
    me, results_dir_of(sm.output.csv, OUTPUTS["training"]), batch_family(),
    alone=lambda: run_training_job(job, params, sm.output.csv, sm.output.placement, sm.log[0]))))
