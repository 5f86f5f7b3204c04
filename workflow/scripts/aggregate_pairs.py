from distbench.comm.analysis.pairs import write_pairs_table
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
run_in_rule(sm.log[0], write_pairs_table, list(sm.input.pairs), sm.input.topology, sm.output[0])
