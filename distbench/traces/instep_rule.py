"""The step that joins training.inspect's in-step record to the traces' step split (training's manifest
names it: aggregate_training_instep). It lives here, above the families, because it wires the two:
distbench.training.analysis.instep_summary writes the tables and takes the traces' reader as an
argument, so no family imports this package."""

from __future__ import annotations

from distbench.launch.in_rule import run_in_rule


def instep(sm) -> None:
    """training.inspect's tables: the in-step buckets beside the comm family's standalone figures (read
    by table name), the four-part split of each multi-rank job's step, MFU against the spec and the
    achievable peak."""
    from distbench.traces.split import job_trace_split
    from distbench.training.analysis.instep_summary import write_instep_tables

    run_in_rule(sm.log[0], lambda: print(write_instep_tables(
        list(sm.input.inspect), sm.input.summary, sm.input.get("comm_summary"), sm.input.get("training_matmul"),
        sm.output.instep, sm.output.split, job_trace_split)))
