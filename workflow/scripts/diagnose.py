from distbench.comm.analysis.diagnose import diagnose
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# run_in_rule: a probe's or a job's file that cannot be read (distbench.core.readers) ends the rule with
# its message and fix, no traceback
run_in_rule(sm.log[0], diagnose, sm.input.summary, sm.input.env, sm.input.topology, sm.input.nccl,
            list(sm.input.placement), sm.output.table, sm.output.advice)
