from distbench.comm.analysis.summary import aggregate
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# A corrupt cached job CSV ends this script with a message naming it (log + stderr, exit 1), no traceback.
run_in_rule(
    sm.log[0], aggregate, list(sm.input.jobs), list(sm.input.ranks), sm.output.raw, sm.output.ranks,
    sm.output.summary, sm.output.largest, sm.output.stragglers,
)
