from distbench.report.summary_json import write_json_outputs
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    for path in write_json_outputs(sm.input.comm, sm.input.env, dict(sm.params.config), sm.output.summary,
                                   sm.output.nccl_tests, sm.input.get("training_summary"),
                                   sm.input.get("memory_summary")):
        print(path)
