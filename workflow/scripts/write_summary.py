from distbench.comm.analysis.nccl_tests_json import placements_of, write_nccl_tests
from distbench.core.section import ReportInputs
from distbench.pipeline.in_rule import run_in_rule
from distbench.report.summary_json import write_summary

sm = snakemake  # noqa: F821 - injected by Snakemake


def main():
    inputs = ReportInputs(summary=sm.input.comm, env=sm.input.env, training_summary=sm.input.get("training_summary"),
                          memory_summary=sm.input.get("memory_summary"))
    placements = placements_of(sm.params.comm_jobs, sm.input.placements)
    for path in [*write_summary(inputs, dict(sm.params.config), sm.output.summary),
                 *write_nccl_tests(sm.input.comm, sm.output.nccl_tests, sm.input.ranks, placements)]:
        print(path)


# run_in_rule: a table or probe file that cannot be read (distbench.core.readers) ends the rule with its
# message and fix, no traceback; summary.json is update()-flagged, so the last good one is put back
run_in_rule(sm.log[0], main)
