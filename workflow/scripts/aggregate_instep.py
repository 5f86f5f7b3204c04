from distbench.pipeline.in_rule import run_in_rule
from distbench.traces.instep_summary import write_instep_tables

sm = snakemake  # noqa: F821 - injected by Snakemake
# training.inspect's tables (issue 40): the in-step buckets beside the comm family's standalone figures,
# the four-part split of each multi-rank job's step, MFU against the spec and the achievable peak
run_in_rule(sm.log[0], lambda: print(write_instep_tables(
    list(sm.input.inspect), sm.input.summary, sm.input.get("comm_summary"), sm.input.get("training_matmul"),
    sm.output.instep, sm.output.split)))
