"""The comm family, as the workflow, the estimate and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, Table, config_flag

PAIRS = config_flag("comm", "pairs")  # the GPU-pair matrix: its table and heat maps

MANIFEST = FamilyManifest(
    name="comm",
    job_rule="comm_job",
    job_dir="comm/{backend}/{dtype}/ws{world_size}/{nccl_env}",
    job_files=("comm.csv", "comm_ranks.csv", "placement.json", "pairs.csv"),
    benchmark="benchmarks/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.tsv",
    jobs=lambda plan: [j.wildcards for j in plan["comm_jobs"]],
    estimated=True,
    traced=True,
    tables=(
        # one summary, written once by aggregate_comm with the probes joined in (% of the link peak,
        # NCCL's algorithm): the report, the prediction and summary.json read it
        Table("comm_summary", "tables/comm_summary.csv", summary_json=True, beside_report=True),
        Table("comm_largest", "tables/comm_largest.csv", beside_report=True),
        Table("comm_stragglers", "tables/comm_stragglers.csv"),
        Table("comm_ranks", "tables/comm_ranks.csv", report=False),
        Table("comm", "tables/comm.csv", report=False, beside_report=True),
        # the link peak, topology, NCCL's digest, placement and advice (the same rule writes it)
        Table("comm_advice", "tables/comm_advice.json"),
        Table("comm_pairs", "tables/comm_pairs.csv", when=PAIRS),
    ),
    figures=(Figures("figures_comm"), Figures("figures_pairs", when=PAIRS)),
    sections={"body": ("distbench.comm.analysis.section:COMMUNICATION",),
              "end": ("distbench.comm.analysis.section:PROBLEMS",)},
    package_data=("analysis/templates/*.j2",),
)
