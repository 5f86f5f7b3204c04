"""The probes and the hardware health check, as the workflow, the estimate and the report see them
(distbench.core.manifest). The NCCL probe is a job of its own (one per run, no wildcards of a job);
the health readings are taken before and after the benchmark jobs."""

from distbench.core.manifest import FamilyManifest, Table, config_flag

MANIFEST = FamilyManifest(
    name="probes",
    job_rule="probe_nccl",
    job_dir="probe",
    job_files=("nccl.json",),
    benchmark="benchmarks/probe/{backend}/ws{world_size}.tsv",
    estimated=True,
    measuring_rules=("health_before", "health_after"),
    cached=("probe/env.json", "probe/topology.json", "probe/nccl.json"),
    tables=(
        # health_before.csv and health_after.csv beside it; `report` alone without a reading says none was taken
        Table("health_diff", "health/health_diff.csv", when=config_flag("health", "enabled"), optional_cached=True),
    ),
    sections={"top": ("distbench.probes.health_section:HEALTH_SECTION",)},
    package_data=("templates/*.j2",),
)
