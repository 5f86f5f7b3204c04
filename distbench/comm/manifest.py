"""The comm family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, JobFiles, Step, Table, TableRef, config_flag, register
from distbench.core.manifest import EstimateDefault

from distbench.comm.contract import TABLES as CONTRACTS

# each table's columns, as its contract (distbench.comm.contract) lists them for every reader; importing
# the contracts registers them with the one reader (distbench.core.readers.read_table)
_COLUMNS = {c.name: c.columns for c in CONTRACTS}

PAIRS = config_flag("comm", "pairs")  # the GPU-pair matrix: its table and heat maps

MANIFEST = register(FamilyManifest(
    name="comm",
    order=10,
    plan="distbench.comm.plan:plan_family",
    job_params="distbench.comm.plan:rule_params",
    job_entry="distbench.comm.job:rule_job",
    job_rule="comm_job",
    job_dir="comm/{backend}/{dtype}/ws{world_size}/{nccl_env}",
    job_files=("comm.csv", "comm_ranks.csv", "placement.json", "pairs.csv"),
    benchmark="benchmarks/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.tsv",
    estimated=True,
    traced=True,
    tables=(
        # one summary, written once by aggregate_comm with the probes joined in (% of the link peak,
        # NCCL's algorithm): the report, the prediction and summary.json read it
        # a row per planned point, failed ones included: rows whenever the plan has comm jobs (with none,
        # every NCCL job skipped on a CPU host, it is written with its columns and no row)
        Table("comm_summary", "tables/comm_summary.csv", summary_json=True, beside_report=True,
              caption="report/comm_summary.rst", subcategory="Communication", rows=True, columns=_COLUMNS["comm_summary"]),
        # the ok series only: no row when every comm job failed
        Table("comm_largest", "tables/comm_largest.csv", beside_report=True, caption="report/comm_largest.rst",
              subcategory="Communication", columns=_COLUMNS["comm_largest"]),
        Table("comm_stragglers", "tables/comm_stragglers.csv", caption="report/comm_stragglers.rst",
              subcategory="Communication"),
        Table("comm_ranks", "tables/comm_ranks.csv", report=False),
        Table("comm", "tables/comm.csv", report=False, beside_report=True, rows=True,
              columns=_COLUMNS["comm"]),
        # the link peak, topology, NCCL's digest, placement and advice (the same rule writes it)
        Table("comm_advice", "tables/comm_advice.json"),
        # the comm series as nccl-tests -J documents, one file per series (a directory)
        Table("comm_nccl_tests", "nccl_tests/", report=False),
        Table("comm_pairs", "tables/comm_pairs.csv", when=PAIRS, caption="report/comm_pairs.rst",
              subcategory="GPU pairs"),
    ),
    figures=(Figures("figures_comm", caption="report/comm_figures.rst", category="Communication"),
             Figures("figures_pairs", when=PAIRS, caption="report/pairs_figures.rst", category="GPU pairs")),
    steps=(
        # the summary with the probes joined onto every point (% of the link peak, NCCL's algorithm per
        # size) and the advice beside it; the report, the prediction, summary.json and the figures read it
        Step("aggregate_comm", "distbench.comm.steps:aggregate", quick=True,
             inputs={"jobs": JobFiles(), "ranks": JobFiles("comm_ranks.csv"), "placement": JobFiles("placement.json"),
                     "env": "probe/env.json", "topology": "probe/topology.json", "nccl": "probe/nccl.json"},
             outputs={"raw": "comm", "ranks": "comm_ranks", "summary": "comm_summary", "largest": "comm_largest",
                      "stragglers": "comm_stragglers", "advice": "comm_advice"}),
        # the link peak and the GPU: the bus-bandwidth figures' reference lines
        Step("plot_comm", "distbench.comm.steps:plot",
             inputs={"summary": TableRef("comm_summary"), "advice": TableRef("comm_advice"), "env": "probe/env.json"},
             outputs={"figures": "figures_comm"}),
        # the nccl-tests documents' -I 1 fields: every rank's time per trial, and its host
        Step("nccl_tests", "distbench.comm.steps:nccl_tests",
             inputs={"summary": TableRef("comm_summary"), "ranks": TableRef("comm_ranks"),
                     "placements": JobFiles("placement.json")},
             outputs={"documents": "comm_nccl_tests"}),
        # the GPU-pair matrix (comm.pairs): every job's pairs.csv, with each pair's link class
        Step("aggregate_pairs", "distbench.comm.steps:aggregate_pairs", when=PAIRS,
             inputs={"pairs": JobFiles("pairs.csv"), "topology": "probe/topology.json"}, outputs={"table": "comm_pairs"}),
        Step("plot_pairs", "distbench.comm.steps:plot_pairs", when=PAIRS,
             inputs={"pairs": TableRef("comm_pairs")}, outputs={"figures": "figures_pairs"}),
    ),
    sections={"body": ("distbench.comm.analysis.section:COMMUNICATION",),
              "end": ("distbench.comm.analysis.section:PROBLEMS",)},
    package_data=("analysis/templates/*.j2", "config.schema.yaml", "analysis/summary.schema.json", "report/*.rst"),
    # Default per-job wall time before any was recorded (distbench.pipeline.estimate), default config,
    # Snakemake's benchmark files, with the run's shared bytecode cache (distbench.launch.pycache). gpu:
    # the NCCL comm job at 2 ranks 15.6 / 16.2 s on 2x H200 (benchmarks/results/quick-h200x2-2026-11-29,
    # c-all-cuts-*/jobs.csv; 24.9 s before the cache), the Gloo comm job 14.8 / 15.7 / 17.3 s at 2 / 4 / 6
    # ranks on a 16-core 1x H200 host (benchmarks/results/one-gpu-pycache-h200x1-2026-11-29); not scaled
    # with world size (2 GPUs: too few sizes). cpu: the project's 2-core machine, unloaded, 2026-11-27:
    # Gloo comm 12.3 / 25.3 / 44.7 s at 2 / 4 / 6 ranks (7.4 s per rank).
    estimate_defaults={
        ("gpu", "nccl"): EstimateDefault(16.0, source="2x H200, 2 ranks: 15.6-16.2 s"),
        ("gpu", "gloo"): EstimateDefault(16.0, source="1x H200 host (16 cores), 2-6 ranks: 15-17 s"),
        ("cpu", "gloo"): EstimateDefault(0.0, per_rank_s=7.4, source="2 cores: 12/25/45 s at 2/4/6 ranks"),
    },
    schema="config.schema.yaml",
    config_check="distbench.comm.hooks:config_check",
    host_needs="distbench.comm.hooks:host_needs",
    quick="distbench.comm.hooks:quick",
))
