from distbench.comm.analysis.findings import read_summary
from distbench.comm.analysis.nccl_tests_json import placements_of, write_nccl_tests
from distbench.core.section import ReportInputs
from distbench.launch.in_rule import run_in_rule
from distbench.report.summary_json import write_summary

sm = snakemake  # noqa: F821 - injected by Snakemake


def main():
    # the tables by name (rules/report.smk summary_inputs): the same files the report reads
    inputs = ReportInputs(tables={name: sm.input[name] for name in sm.params.tables}, env=sm.input.env)
    placements = placements_of(sm.params.comm_jobs, sm.input.placements)
    for path in [*write_summary(inputs, dict(sm.params.config), sm.output.summary),
                 # the summary as summary.json read it (the same reader: one read of the file)
                 *write_nccl_tests(inputs.table("comm_summary", read_summary), sm.output.nccl_tests, sm.input.ranks,
                                   placements)]:
        print(path)


# run_in_rule: a table or probe file that cannot be read (distbench.core.readers) ends the rule with its
# message and fix, no traceback; summary.json is update()-flagged, so the last good one is put back
run_in_rule(sm.log[0], main)
