"""The traces' overlap, as the workflow and the report see it (distbench.core.manifest): made when a
family whose manifest says `traced` is profiled (config `profile`)."""

from distbench.core.manifest import PackageManifest, Table, register

MANIFEST = register(PackageManifest(
    name="traces",
    order=60,
    # the traced families' modes, resolved by the pipeline (distbench.pipeline.plan.profiled)
    active=lambda config, plan: bool(plan.get("profiled")),
    tables=(Table("trace_overlap", "tables/trace_overlap.csv"),),
    sections={"body": ("distbench.traces.section:TRACES",)},
    package_data=("templates/*.j2",),
))
