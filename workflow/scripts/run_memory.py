import sys
from pathlib import Path

from distbench.launch import JobInterrupted
from distbench.memory.job import run_memory_job
from distbench.plan import MemoryJob
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
job = MemoryJob(sm.wildcards.backend, int(sm.wildcards.world_size), sm.wildcards.model, sm.wildcards.config,
                sm.params.strategy, sm.params.gradient_as_bucket_view)
# memory.snapshot: the pickle lands beside the job's CSV (the report links it)
snapshot = Path(sm.output.csv).with_name("snapshot.pickle") if sm.params.job["snapshot"] else None
with logged(str(sm.log[0]) + ".launcher"):
    # As the other families: a failed job leaves its CSV (failed/not_run rows); an interrupted one
    # leaves nothing and exits non-zero, so the next run starts it again.
    try:
        print(f"memory job {job.wildcards}: "
              f"{run_memory_job(job, sm.params.job, sm.output.csv, sm.output.placement, sm.log[0], snapshot)}")
    except JobInterrupted as e:
        print(f"memory job {job.wildcards}: {e.why}")
        sys.exit(e.exit_code)
