from pathlib import Path

from distbench.memory.job import run_memory_job
from distbench.memory.plan import MemoryJob
from distbench.pipeline.in_rule import run_job_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# the job's values, and where its ranks run (nodes, launcher: distbench.launch.cluster)
params = {**sm.params.job, "launch": sm.params.launch}
job = MemoryJob(sm.wildcards.backend, int(sm.wildcards.world_size), sm.wildcards.model, sm.wildcards.config,
                sm.params.strategy, sm.params.gradient_as_bucket_view)
# memory.snapshot: the pickle lands beside the job's CSV (the report links it)
snapshot = Path(sm.output.csv).with_name("snapshot.pickle") if params["snapshot"] else None
run_job_in_rule(sm.log[0], f"memory job {job.wildcards}",
                lambda: run_memory_job(job, params, sm.output.csv, sm.output.placement, sm.log[0], snapshot))
