from distbench.traces.overlap import write_overlap_table
from distbench.launch.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
run_in_rule(sm.log[0], write_overlap_table, dict(sm.params.jobs), sm.output[0])
