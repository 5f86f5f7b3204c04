from distbench.launch.joblock import held
from distbench.pipeline.in_rule import run_job_in_rule
from distbench.training.matmul import run_sweeps

sm = snakemake  # noqa: F821 - injected by Snakemake
what = "matmul sweep"
# one measurement at a time on this host (config host_lock), as a benchmark job
run_job_in_rule(sm.log[0], what, held(sm, what, lambda: run_sweeps(sm.params.sweep, sm.output[0], sm.log[0])))
