import json
from pathlib import Path

from distbench.report import render_report
from distbench.workflow import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    figures = sorted(Path(sm.input.figures).glob("*.png"))
    extra = json.loads(Path(sm.input.advice).read_text())
    training = sm.input.get("training_summary")
    if training:
        figures += sorted(Path(sm.input.training_figures).glob("*.png"))
    memory = sm.input.get("memory_summary")
    if memory:
        figures += sorted(Path(sm.input.memory_figures).glob("*.png"))
    pairs = sm.input.get("pairs_table")
    if pairs:
        figures += sorted(Path(sm.input.pairs_figures).glob("*.png"))
    predict = sm.input.get("predict_validation")
    if predict:
        figures += sorted(Path(sm.input.predict_figures).glob("*.png"))
    render_report(sm.input.summary, sm.input.largest, sm.input.env, figures, dict(sm.params.config),
                  sm.params.plan, sm.output.md, sm.output.html, extra=extra, figures_dir=sm.output.figures,
                  training_summary=training, memory_summary=memory, predict_validation=predict,
                  stragglers_csv=sm.input.stragglers, pairs_csv=pairs)
