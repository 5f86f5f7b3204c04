from distbench.core.io import atomic_write_json
from distbench.core.section import ReportInputs
from distbench.launch.in_rule import run_in_rule
from distbench.report.summary_json import write_summary

sm = snakemake  # noqa: F821 - injected by Snakemake


def main():
    # the tables by name (rules/report.smk summary_inputs): the same files the report reads
    # and the plan: a summary table of a family that ran must hold rows (ReportInputs.table)
    inputs = ReportInputs(tables={name: sm.input[name] for name in sm.params.tables}, env=sm.input.env,
                          plan=sm.params.plan)
    for path in write_summary(inputs, dict(sm.params.config), sm.output.summary):
        print(path)
    # last: summary.json is in place (rules/report.smk: without it the next run writes it again)
    atomic_write_json(sm.output.written, {"summary": sm.output.summary})


# run_in_rule: a table or probe file that cannot be read (distbench.core.readers) ends the rule with its
# message and fix, no traceback; summary.json is update()-flagged, so the last good one is put back
run_in_rule(sm.log[0], main)
