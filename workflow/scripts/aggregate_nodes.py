from distbench.nodes.analysis.summary import write_tables
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# A corrupt cached round CSV ends this script with a message naming it (log + stderr, exit 1).
run_in_rule(sm.log[0], write_tables, list(sm.input.rounds), sm.output.raw, sm.output.pairs, sm.output.scores,
            {"nodes": dict(sm.params.limits)})
