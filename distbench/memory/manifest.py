"""The memory family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, JobFiles, Step, Table, TableRef, register
from distbench.core.manifest import EstimateDefault

from distbench.memory.contract import TABLES as CONTRACTS

# each table's columns, as its contract (distbench.memory.contract) lists them for every reader; importing
# the contracts registers them with the one reader (distbench.core.readers.read_table)
_COLUMNS = {c.name: c.columns for c in CONTRACTS}

MANIFEST = register(FamilyManifest(
    name="memory",
    order=30,
    plan="distbench.memory.plan:plan_family",
    active=lambda config, plan: bool(plan["jobs"]["memory"]),
    job_params="distbench.memory.plan:rule_params",
    job_entry="distbench.memory.job:rule_job",
    job_rule="memory_job",
    job_dir="memory/{backend}/{model}/ws{world_size}/{config}",
    job_files=("memory.csv", "placement.json"),
    benchmark="benchmarks/memory/{backend}/{model}/ws{world_size}/{config}.tsv",
    estimated=True,
    shares_launches=True,
    tables=(
        # a row per job, failed ones included (every job leaves rows): rows whenever the family runs
        Table("memory_summary", "tables/memory_summary.csv", summary_json=True,
              caption="report/memory_summary.rst", subcategory="Memory", rows=True,
              columns=_COLUMNS["memory_summary"]),
        Table("memory", "tables/memory.csv", rows=True,
              columns=_COLUMNS["memory"]),
    ),
    figures=(Figures("figures_memory", caption="report/memory_figures.rst", category="Memory"),),
    steps=(
        Step("aggregate_memory", "distbench.memory.steps:aggregate", inputs={"jobs": JobFiles()},
             outputs={"raw": "memory", "summary": "memory_summary"}),
        Step("plot_memory", "distbench.memory.steps:plot", inputs={"raw": TableRef("memory")},
             outputs={"figures": "figures_memory"}),
    ),
    sections={"body": ("distbench.memory.analysis.section:MEMORY",)},
    package_data=("analysis/templates/*.j2", "config.schema.yaml", "analysis/summary.schema.json", "report/*.rst"),
    # Default per-job wall time before any was recorded (distbench.pipeline.estimate), measured as the
    # comm family's (benchmarks/results/time-to-answer-h200x2-2026-11-27): 2x H200, 2026-11-27: 14.4-23.8 s
    # (median 20), not scaled with world size; the project's 2 cores, unloaded: 3.4-4.3 s at 1 rank,
    # 4.2-5.9 at 2 (2.8 s + 1.0 s per rank).
    estimate_defaults={
        ("gpu", "nccl"): EstimateDefault(20.0, source="2x H200: 14-24 s"),
        ("cpu", "gloo"): EstimateDefault(2.8, per_rank_s=1.0, source="2 cores: 3-4 s at 1 rank, 4-6 s at 2"),
    },
    # a shared launch's fixed cost (batch_launch), as the training family's: 2x H200, the first
    # configuration 14-18 s, the others 3 s (FSDP memory jobs, no search); 2 cores: about 1.5 s
    launch_cost_s={"gpu": 9.0, "cpu": 1.5},
    schema="config.schema.yaml",
))
