from distbench.runs import export_run
from distbench.workflow import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
tables = [sm.input.comm, sm.input.get("training_summary"), sm.input.get("memory_summary")]
run_in_rule(sm.log[0], export_run, [t for t in tables if t], sm.input.env, sm.output[0], sm.params.label)
