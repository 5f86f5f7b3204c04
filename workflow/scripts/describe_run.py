from distbench.report.runs import describe_run
from distbench.launch.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
run_in_rule(sm.log[0], describe_run, sm.input.env, sm.output[0], sm.params.label)
