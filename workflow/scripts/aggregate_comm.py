from distbench.aggregate import aggregate
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    aggregate(list(sm.input), sm.output.raw, sm.output.summary, sm.output.largest)
