import json
from pathlib import Path

from distbench.report.render import render_report, snakemake_run_started
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    extra = json.loads(Path(sm.input.advice).read_text())
    # each optional section: its table (absent when the plan has none) and its figures directory
    tables = {}
    figures = sorted(Path(sm.input.figures).glob("*.png"))
    for table, figure_dir in (("training_summary", "training_figures"), ("memory_summary", "memory_figures"),
                              ("pairs_table", "pairs_figures"), ("predict_validation", "predict_figures")):
        tables[table] = sm.input.get(table)
        if tables[table]:
            figures += sorted(Path(sm.input[figure_dir]).glob("*.png"))
    render_report(sm.input.summary, sm.input.largest, sm.input.env, figures, dict(sm.params.config),
                  sm.params.plan, sm.output.md, sm.output.html, extra=extra, figures_dir=sm.output.figures,
                  training_summary=tables["training_summary"], memory_summary=tables["memory_summary"],
                  predict_validation=tables["predict_validation"], stragglers_csv=sm.input.stragglers,
                  pairs_csv=tables["pairs_table"], traces_csv=sm.input.get("traces"),
                  placements=list(sm.input.placements), run_started=snakemake_run_started(),
                  results_dir=Path(sm.input.run).parent.parent, run_label=sm.params.run_label,
                  full_tables=list(sm.input.full_tables), tables_dir=sm.output.tables)
