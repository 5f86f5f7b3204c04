from distbench.aggregate import aggregate
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    aggregate(
        list(sm.input.jobs), list(sm.input.ranks), sm.output.raw, sm.output.ranks, sm.output.summary,
        sm.output.largest,
    )
