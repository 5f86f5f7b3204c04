from distbench.training.analysis.summary import aggregate_training
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# A corrupt cached job CSV ends this script with a message naming it (log + stderr, exit 1), no traceback.
run_in_rule(sm.log[0], aggregate_training, list(sm.input.jobs), sm.output.raw, sm.output.summary,
            sm.params.cost_gpu_hour_usd)
