from distbench.aggregate import aggregate_training
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    aggregate_training(list(sm.input.jobs), sm.output.raw, sm.output.summary, sm.params.cost_gpu_hour_usd)
