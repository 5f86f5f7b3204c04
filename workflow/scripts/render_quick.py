import json
from pathlib import Path

from distbench.core.section import ReportInputs
from distbench.pipeline.in_rule import logged
from distbench.report.quick import render_quick

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    inputs = ReportInputs(
        summary=sm.input.summary, largest=sm.input.largest, env=sm.input.env, config=dict(sm.params.config),
        plan=sm.params.plan, extra=json.loads(Path(sm.input.advice).read_text()),
        training_summary=sm.input.get("training_summary"), run_label=sm.params.run_label)
    render_quick(inputs, sm.params.quick, sm.output.md)
