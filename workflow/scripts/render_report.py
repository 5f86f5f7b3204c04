from datetime import datetime, timezone
from pathlib import Path

from distbench.core.io import atomic_write_json
from distbench.core.section import ReportInputs
from distbench.launch.in_rule import run_in_rule
from distbench.report.appendix import snakemake_run_started
from distbench.report.quick import supersede_quick
from distbench.report.render import documents_of, figures_in, render_report

sm = snakemake  # noqa: F821 - injected by Snakemake


def main():
    # the tables by name, as the families' manifests name them (rules/common.smk report_inputs)
    tables = {name: sm.input[name] for name in sm.params.tables}
    inputs = ReportInputs(
        tables=tables, env=sm.input.env, figures=figures_in(sm.input.figure_dirs), config=dict(sm.params.config),
        plan=sm.params.plan, extra=documents_of(tables), placements=list(sm.input.placements),
        run_started=snakemake_run_started(), results_dir=Path(sm.input.run).parent.parent,
        run_label=sm.params.run_label, full_tables=list(sm.input.full_tables))
    render_report(inputs, sm.output.md, sm.output.html, figures_dir=sm.output.figures, tables_dir=sm.output.tables)
    # a quick answer beside it (report/quick.md) said what was left for the full run: no longer so
    supersede_quick(sm.output.md, sm.params.plan, Path(sm.input.run).parent,
                    datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
    # last: the report is in place (rules/report.smk: without it the next run renders again)
    atomic_write_json(sm.output.rendered, {"report": sm.output.md, "rendered": datetime.now(timezone.utc).isoformat()})


# A file of this run that cannot be read (distbench.core.readers.UnreadableFile, a SchemaError) ends the
# rule with its message and fix, no traceback; the outputs are update()-flagged in rules/report.smk, so
# Snakemake puts the last good report back. A baseline or another host's run that cannot be read does
# not end it: its section names the file and the rest renders.
run_in_rule(sm.log[0], main)
