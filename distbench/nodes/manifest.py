"""The node-pair rounds, as the workflow and the report see them (distbench.core.manifest). A round is
one job; the plan of rounds is the pipeline's plan["nodes_plan"] (distbench.nodes.plan.nodes_plan)."""

from distbench.core.manifest import FamilyManifest, Figures, Table
from distbench.nodes.scale import BENCHMARK

MANIFEST = FamilyManifest(
    name="nodes",
    active=lambda config, plan: bool(plan["nodes_plan"].backend),
    job_rule="nodes_round",
    job_dir="nodes/{backend}/n{nodes}/{mode}/round{round}",
    job_files=("nodes.csv", "placement.json"),
    benchmark=BENCHMARK,
    jobs=lambda plan: [plan["nodes_plan"].wildcards(r) for r in plan["nodes_plan"].rounds],
    tables=(
        Table("nodes_scores", "tables/nodes_scores.csv"),
        Table("nodes_pairs", "tables/nodes_pairs.csv"),
        Table("nodes", "tables/nodes.csv", report=False),
    ),
    figures=(Figures("figures_nodes"),),
    sections={"top": ("distbench.nodes.analysis.section:NODES",)},
    package_data=("analysis/templates/*.j2",),
)
