"""The memory family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, Table

MANIFEST = FamilyManifest(
    name="memory",
    active=lambda config, plan: bool(plan["memory_jobs"]),
    job_rule="memory_job",
    job_dir="memory/{backend}/{model}/ws{world_size}/{config}",
    job_files=("memory.csv", "placement.json"),
    benchmark="benchmarks/memory/{backend}/{model}/ws{world_size}/{config}.tsv",
    jobs=lambda plan: [j.wildcards for j in plan["memory_jobs"]],
    estimated=True,
    shares_launches=True,
    tables=(
        Table("memory_summary", "tables/memory_summary.csv", summary_json=True),
        Table("memory", "tables/memory.csv"),
    ),
    figures=(Figures("figures_memory"),),
    sections={"body": ("distbench.memory.analysis.section:MEMORY",)},
    package_data=("analysis/templates/*.j2",),
)
