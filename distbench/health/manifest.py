"""The hardware health check as the workflow, the estimate and the report see it
(distbench.core.manifest): its readings are taken before and after the benchmark jobs (rules
health_before and health_after: they load the GPUs, so `report` alone never starts them), its
difference table is read by the report, and its section opens the report's top."""

from distbench.core.manifest import PackageManifest, Table, config_flag, register

MANIFEST = register(PackageManifest(
    name="health",
    order=75,
    measuring_rules=("health_before", "health_after"),
    tables=(
        # health_before.csv and health_after.csv beside it; `report` alone without a reading says none was taken
        Table("health_diff", "health/health_diff.csv", when=config_flag("health", "enabled"), optional_cached=True),
    ),
    sections={"top": ("distbench.health.section:HEALTH_SECTION",)},
    package_data=("templates/*.j2",),
))
