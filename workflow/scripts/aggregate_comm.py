from distbench.comm.analysis.diagnose import diagnose
from distbench.comm.analysis.summary import aggregate
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake


def join(summary):
    """The probes joined onto every point (% of the link peak, NCCL's algorithm); the advice beside it."""
    return diagnose(summary, sm.input.env, sm.input.topology, sm.input.nccl, list(sm.input.placement), sm.output.advice)


# A corrupt cached job CSV or probe file ends this script with a message naming it (log + stderr, exit 1),
# no traceback.
run_in_rule(
    sm.log[0], aggregate, list(sm.input.jobs), list(sm.input.ranks), sm.output.raw, sm.output.ranks,
    sm.output.summary, sm.output.largest, sm.output.stragglers, join,
)
