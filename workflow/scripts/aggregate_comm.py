import pandas as pd

from distbench.comm.analysis.summary import aggregate, largest, stragglers, summarize
from distbench.comm.contract import COMM, COMM_RANKS
from distbench.core.io import atomic_write_csv
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake


def no_comm_jobs(out_raw, out_ranks, out_summary, out_largest, out_stragglers) -> None:
    """No comm job in the plan (backends [nccl] on a host without a GPU: every NCCL job skipped, as
    the default run skips them): the tables with their columns and no row, so the report still says
    what was skipped instead of this step failing on nothing to concatenate (issue 37, item 7)."""
    raw = pd.DataFrame({c: pd.Series(dtype="object") for c in COMM.names})
    summary = summarize(raw)
    for path, df in ((out_raw, raw), (out_ranks, pd.DataFrame({c: pd.Series(dtype="object") for c in COMM_RANKS.names})),
                     (out_summary, summary), (out_largest, largest(summary)), (out_stragglers, stragglers(raw))):
        atomic_write_csv(path, df)
    print("no comm jobs in this plan: empty tables (the report names what was skipped)")


# A corrupt cached job CSV ends this script with a message naming it (log + stderr, exit 1), no traceback.
run_in_rule(
    sm.log[0], aggregate if list(sm.input.jobs) else lambda _jobs, _ranks, *out: no_comm_jobs(*out),
    list(sm.input.jobs), list(sm.input.ranks), sm.output.raw, sm.output.ranks,
    sm.output.summary, sm.output.largest, sm.output.stragglers,
)
