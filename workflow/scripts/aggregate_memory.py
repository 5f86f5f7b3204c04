from distbench.memory.analysis.summary import aggregate_memory
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# A corrupt cached job CSV ends this script with a message naming it (log + stderr, exit 1), no traceback.
run_in_rule(sm.log[0], aggregate_memory, list(sm.input.jobs), sm.output.raw, sm.output.summary)
