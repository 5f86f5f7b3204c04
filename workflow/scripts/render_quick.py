from distbench.core.section import ReportInputs
from distbench.launch.in_rule import logged
from distbench.report.quick import render_quick
from distbench.report.render import documents_of

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    # the quick tables by name (rules/quick.smk names its inputs as the families' manifests do)
    tables = {k: v for k, v in sm.input.items() if k != "env"}
    inputs = ReportInputs(tables=tables, env=sm.input.env, config=dict(sm.params.config), plan=sm.params.plan,
                          extra=documents_of(tables), run_label=sm.params.run_label)
    render_quick(inputs, sm.params.quick, sm.output.md)
