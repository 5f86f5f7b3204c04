"""The training family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, Table, config_flag

# training.inspect (issue 40): the in-step collectives and the four-part step split of every multi-rank job
INSPECT = config_flag("training", "inspect")


def matmul_planned(config, plan) -> bool:
    """training.matmul_sweep with training jobs on GPUs (a CPU run has none: the plan names it,
    distbench.training.plan.matmul_skipped). Read off the plan here: the report's readers import this
    module, and the plan's module reaches the workloads."""
    return bool(config["training"].get("matmul_sweep")) and any(j.backend == "nccl" for j in plan["training_jobs"])


MANIFEST = FamilyManifest(
    name="training",
    active=lambda config, plan: bool(plan["training_jobs"]),
    job_rule="training_job",
    job_dir="training/{backend}/{model}/ws{world_size}/{config}",
    job_files=("training.csv", "placement.json"),
    benchmark="benchmarks/training/{backend}/{model}/ws{world_size}/{config}.tsv",
    jobs=lambda plan: [j.wildcards for j in plan["training_jobs"]],
    # the achievable matmul peak (training.matmul_sweep): every GPU under load, before the jobs
    measuring_rules=("training_matmul",),
    estimated=True,
    traced=True,
    shares_launches=True,
    tables=(
        Table("training_summary", "tables/training_summary.csv", summary_json=True),
        Table("training", "tables/training.csv", report=False),
        Table("training_instep", "tables/training_instep.csv", when=INSPECT, beside_report=True),
        Table("training_split", "tables/training_split.csv", when=INSPECT, beside_report=True),
        Table("training_matmul", "tables/training_matmul.csv", report=False, beside_report=True, when=matmul_planned),
    ),
    figures=(Figures("figures_training"),),
    sections={"body": ("distbench.training.analysis.section:TRAINING",)},
    package_data=("analysis/templates/*.j2",),
)
