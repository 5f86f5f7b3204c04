import sys

from distbench.comm.job import run_comm_job
from distbench.plan import CommJob
from distbench.launch import JobInterrupted
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
job = CommJob(sm.wildcards.backend, sm.wildcards.dtype, int(sm.wildcards.world_size),
              sm.wildcards.nccl_env, sm.params.nccl_env)
with logged(str(sm.log[0]) + ".launcher"):
    # A failed job still leaves its CSV (status failed/not_run), so the rest of the DAG goes on; an
    # interrupted one leaves nothing and exits non-zero, so the next run starts it again.
    try:
        print(f"comm job {job.wildcards}: {run_comm_job(job, sm.params.job, sm.output.csv, sm.output.placement, sm.log[0])}")
    except JobInterrupted as e:
        print(f"comm job {job.wildcards}: {e.why}")
        sys.exit(e.exit_code)
