"""The node-pair rounds, as the workflow and the report see them (distbench.core.manifest). A round is
one job; the plan of rounds is the pipeline's plan["nodes_plan"] (distbench.nodes.plan.nodes_plan)."""

from distbench.core.manifest import FamilyManifest, Figures, JobFiles, Step, Table, TableRef, register
from distbench.nodes.scale import BENCHMARK

from distbench.nodes.contract import TABLES as CONTRACTS

# each table's columns, as its contract (distbench.nodes.contract) lists them for every reader; importing
# the contracts registers them with the one reader (distbench.core.readers.read_table)
_COLUMNS = {c.name: c.columns for c in CONTRACTS}

MANIFEST = register(FamilyManifest(
    name="nodes",
    order=40,
    plan="distbench.nodes.plan:plan_family",
    active=lambda config, plan: bool(plan["nodes_plan"].backend),
    job_params="distbench.nodes.plan:rule_params",
    job_entry="distbench.nodes.job:rule_job",
    # every node, one agent each, whatever the round's world size (distbench.launch.cluster)
    job_launch="distbench.nodes.plan:rule_launch",
    job_resources="distbench.nodes.plan:rule_resources",
    job_constraints={"nodes": r"\d+", "round": r"\d+", "mode": "all_pairs|random"},
    # before the first job: this plan's rounds and their time, and the same on paper at 8, 64 and
    # 1,000 nodes (distbench.nodes.scale)
    announce="distbench.nodes.scale:announce",
    job_rule="nodes_round",
    job_dir="nodes/{backend}/n{nodes}/{mode}/round{round}",
    job_files=("nodes.csv", "placement.json"),
    benchmark=BENCHMARK,
    tables=(
        Table("nodes_scores", "tables/nodes_scores.csv", columns=_COLUMNS["nodes_scores"], caption="report/nodes_scores.rst", subcategory="Nodes"),
        Table("nodes_pairs", "tables/nodes_pairs.csv", columns=_COLUMNS["nodes_pairs"]),
        Table("nodes", "tables/nodes.csv", report=False, columns=_COLUMNS["nodes"]),
    ),
    figures=(Figures("figures_nodes", caption="report/nodes_figures.rst", category="Nodes"),),
    steps=(
        Step("aggregate_nodes", "distbench.nodes.steps:aggregate", inputs={"rounds": JobFiles()},
             outputs={"raw": "nodes", "pairs": "nodes_pairs", "scores": "nodes_scores"},
             params={"limits": "distbench.nodes.steps:limits"}),
        Step("plot_nodes", "distbench.nodes.steps:plot", inputs={"pairs": TableRef("nodes_pairs")},
             outputs={"figures": "figures_nodes"}),
    ),
    sections={"top": ("distbench.nodes.analysis.section:NODES",)},
    package_data=("analysis/templates/*.j2", "config.schema.yaml", "report/*.rst"),
    schema="config.schema.yaml",
    host_placement="distbench.nodes.hooks:host_placement",
))
