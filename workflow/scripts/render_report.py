from datetime import datetime, timezone
from pathlib import Path

from distbench.core.readers import read_json, remake
from distbench.core.section import ReportInputs
from distbench.pipeline.in_rule import run_in_rule
from distbench.report.appendix import snakemake_run_started
from distbench.report.quick import supersede_quick
from distbench.report.render import render_report

sm = snakemake  # noqa: F821 - injected by Snakemake


def main():
    # each optional section: its table (absent when the plan has none) and its figures directory
    tables = {}
    figures = sorted(Path(sm.input.figures).glob("*.png"))
    for table, figure_dir in (("training_summary", "training_figures"), ("memory_summary", "memory_figures"),
                              ("pairs_table", "pairs_figures"), ("predict_validation", "predict_figures"),
                              ("nodes_scores", "nodes_figures")):
        tables[table] = sm.input.get(table)
        if tables[table]:
            figures += sorted(Path(sm.input[figure_dir]).glob("*.png"))
    inputs = ReportInputs(
        summary=sm.input.summary, largest=sm.input.largest, env=sm.input.env, figures=figures,
        config=dict(sm.params.config), plan=sm.params.plan, extra=read_json(sm.input.advice, remake(sm.input.advice)),
        training_summary=tables["training_summary"], memory_summary=tables["memory_summary"],
        predict_validation=tables["predict_validation"], stragglers_csv=sm.input.stragglers,
        pairs_csv=tables["pairs_table"], nodes_scores=tables["nodes_scores"], traces_csv=sm.input.get("traces"),
        placements=list(sm.input.placements), health=Path(sm.input.health).parent if sm.input.get("health") else None,
        run_started=snakemake_run_started(), results_dir=Path(sm.input.run).parent.parent,
        run_label=sm.params.run_label, full_tables=list(sm.input.full_tables))
    render_report(inputs, sm.output.md, sm.output.html, figures_dir=sm.output.figures, tables_dir=sm.output.tables)
    # a quick answer beside it (report/quick.md) said what was left for the full run: no longer so
    supersede_quick(sm.output.md, sm.params.plan, Path(sm.input.run).parent,
                    datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


# A file of this run that cannot be read (distbench.core.readers.UnreadableFile, a SchemaError) ends the
# rule with its message and fix, no traceback; the outputs are update()-flagged in rules/report.smk, so
# Snakemake puts the last good report back. A baseline or another host's run that cannot be read does
# not end it: its section names the file and the rest renders.
run_in_rule(sm.log[0], main)
