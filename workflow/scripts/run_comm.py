from distbench.comm.job import run_comm_job
from distbench.comm.plan import CommJob
from distbench.launch.joblock import held
from distbench.pipeline.in_rule import run_job_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# the job's values, and where its ranks run (nodes, launcher: distbench.launch.cluster)
params = {**sm.params.job, "launch": sm.params.launch, "pairs": sm.params.pairs}
job = CommJob(sm.wildcards.backend, sm.wildcards.dtype, int(sm.wildcards.world_size),
              sm.wildcards.nccl_env, sm.params.nccl_env)
what = f"comm job {job.wildcards}"
# one measurement at a time on this host (config host_lock), taken before the job's time limit starts
run_job_in_rule(sm.log[0], what, held(sm, what, lambda: run_comm_job(job, params, sm.output.csv, sm.output.placement,
                                                                     sm.log[0])))
