"""The training family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, Table

MANIFEST = FamilyManifest(
    name="training",
    active=lambda config, plan: bool(plan["training_jobs"]),
    job_rule="training_job",
    job_dir="training/{backend}/{model}/ws{world_size}/{config}",
    job_files=("training.csv", "placement.json"),
    benchmark="benchmarks/training/{backend}/{model}/ws{world_size}/{config}.tsv",
    jobs=lambda plan: [j.wildcards for j in plan["training_jobs"]],
    estimated=True,
    traced=True,
    shares_launches=True,
    tables=(
        Table("training_summary", "tables/training_summary.csv", summary_json=True),
        Table("training", "tables/training.csv", report=False),
    ),
    figures=(Figures("figures_training"),),
    sections={"body": ("distbench.training.analysis.section:TRAINING",)},
    package_data=("analysis/templates/*.j2",),
)
