from distbench.comm.analysis.diagnose import diagnose
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    diagnose(sm.input.summary, sm.input.env, sm.input.topology, sm.input.nccl, list(sm.input.placement),
             sm.output.table, sm.output.advice)
