"""The training family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, JobFiles, Step, Table, TableRef, config_flag, register
from distbench.core.manifest import EstimateDefault

from distbench.training.contract import TABLES as CONTRACTS

# each table's columns, as its contract (distbench.training.contract) lists them for every reader; importing
# the contracts registers them with the one reader (distbench.core.readers.read_table)
_COLUMNS = {c.name: c.columns for c in CONTRACTS}

# training.inspect: the in-step collectives and the four-part step split of every multi-rank job
INSPECT = config_flag("training", "inspect")


def matmul_planned(config, plan) -> bool:
    """training.matmul_sweep with training jobs on GPUs (a CPU run has none: the plan names it,
    distbench.training.plan.matmul_skipped). Read off the plan here: the report's readers import this
    module, and the plan's module reaches the workloads."""
    return bool(config["training"].get("matmul_sweep")) and any(j.backend == "nccl" for j in plan["jobs"]["training"])


MANIFEST = register(FamilyManifest(
    name="training",
    order=20,
    plan="distbench.training.plan:plan_family",
    active=lambda config, plan: bool(plan["jobs"]["training"]),
    job_params="distbench.training.plan:rule_params",
    job_entry="distbench.training.job:rule_job",
    # training.inspect: each job's in-step record (distbench.training.inspect)
    job_optional={"inspect": ("inspect", INSPECT)},
    # training.matmul_sweep loads every GPU: it runs before the jobs, never beside one
    job_after=("training_matmul",),
    job_rule="training_job",
    job_dir="training/{backend}/{model}/ws{world_size}/{config}",
    job_files=("training.csv", "placement.json"),
    benchmark="benchmarks/training/{backend}/{model}/ws{world_size}/{config}.tsv",
    estimated=True,
    traced=True,
    shares_launches=True,
    tables=(
        # a row per job, failed ones included (every job leaves rows): rows whenever the family runs
        Table("training_summary", "tables/training_summary.csv", summary_json=True,
              caption="report/training_summary.rst", subcategory="Training", rows=True,
              columns=_COLUMNS["training_summary"]),
        Table("training", "tables/training.csv", report=False, rows=True, columns=_COLUMNS["training"]),
        Table("training_instep", "tables/training_instep.csv", when=INSPECT, beside_report=True),
        Table("training_split", "tables/training_split.csv", when=INSPECT, beside_report=True),
        # the traces' per-step figures of every inspected job (distbench.traces.split_step), which
        # training_split is made of: a row per job, whether it has GPU traces or not
        Table("training_trace_split", "tables/training_trace_split.csv", report=False, when=INSPECT, rows=True,
              columns=_COLUMNS["training_trace_split"]),
        Table("training_matmul", "tables/training_matmul.csv", report=False, beside_report=True, when=matmul_planned),
    ),
    figures=(Figures("figures_training", caption="report/training_figures.rst", category="Training"),),
    steps=(
        Step("aggregate_training", "distbench.training.steps:aggregate", quick=True, inputs={"jobs": JobFiles()},
             outputs={"raw": "training", "summary": "training_summary"},
             params={"cost_gpu_hour_usd": "distbench.training.steps:cost_gpu_hour_usd"}),
        Step("plot_training", "distbench.training.steps:plot", inputs={"summary": TableRef("training_summary")},
             outputs={"figures": "figures_training"}),
        # training.matmul_sweep: the achievable matmul peak of each GPU with the models' own GEMMs in
        # their dtype (distbench.training.matmul); planned only where training runs on GPUs
        Step("training_matmul", "distbench.training.steps:matmul", measures=True, when=matmul_planned,
             outputs={"table": "training_matmul"}, params={"sweep": "distbench.training.steps:matmul_sweep"}),
        # training.inspect: the traces' figures of every job's traced steps, read by the traces package
        # (named here, never imported: it lies above the families)
        Step("training_trace_split", "distbench.traces.split_step:split_table", when=INSPECT,
             inputs={"inspect": JobFiles("inspect")}, outputs={"table": "training_trace_split"}),
        # training.inspect: every multi-rank job's collectives inside its timed steps, beside the comm
        # family's standalone figures (by table name), and its step split in four parts (the traces'
        # figures by table name too)
        Step("aggregate_training_instep", "distbench.training.steps:instep", when=INSPECT,
             inputs={"comm_summary": TableRef("comm_summary", optional=True),
                     "training_matmul": TableRef("training_matmul", optional=True),
                     "trace_split": TableRef("training_trace_split"),
                     "inspect": JobFiles("inspect"), "summary": TableRef("training_summary")},
             outputs={"instep": "training_instep", "split": "training_split"}),
    ),
    sections={"body": ("distbench.training.analysis.section:TRAINING",)},
    package_data=("analysis/templates/*.j2", "config.schema.yaml", "analysis/summary.schema.json", "report/*.rst"),
    # Default per-job wall time before any was recorded (distbench.pipeline.estimate), measured as the
    # comm family's (benchmarks/results/time-to-answer-h200x2-2026-11-27): 2x H200, 2026-11-27: 10.1-21.9 s
    # (median 19), not scaled with world size; the project's 2 cores, unloaded: 2.9-4.0 s at 1 rank,
    # 3.7-4.6 at 2, 6.5-9.6 at 4, 9.0-15.1 at 6 (1.3 s + 1.8 s per rank).
    estimate_defaults={
        ("gpu", "nccl"): EstimateDefault(19.0, source="2x H200: 10-22 s"),
        ("cpu", "gloo"): EstimateDefault(1.3, per_rank_s=1.8, source="2 cores: 3-4 s at 1 rank, 9-15 s at 6"),
    },
    # With batch_launch (distbench.launch.batch) the jobs of one backend and world size share a launch:
    # its first job pays the launch's fixed cost, the others only their own measurement, this much less
    # than the default above. 2x H200, 2026-11-27 (benchmarks/results/batch-launch-h200x2-2026-11-27): the
    # first configuration of a launch took 14-18 s, the others 7-10 s; 2 cores: about 1.5 s (import torch
    # and the Gloo group) of a 3-5 s job.
    launch_cost_s={"gpu": 9.0, "cpu": 1.5},
    # a larger language model measures longer than the default's gpt 1.3b (2.7b: 114 s printed for 173 s
    # of jobs before this, benchmarks/results/layouts-inspected-h200x2-2026-11-28)
    estimate_weight="distbench.training.hooks:estimate_weight",
    schema="config.schema.yaml",
    config_check="distbench.training.hooks:config_check",
    quick="distbench.training.hooks:quick",
))
