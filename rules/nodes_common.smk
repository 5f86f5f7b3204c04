# The node-pair rounds' plan and the helpers of rules/nodes.smk (functions apart from rules, as
# rules/common.smk: Snakemake's lint). distbench.nodes holds the logic.
from distbench.nodes.analysis.summary import thresholds as nodes_thresholds
from distbench.nodes.plan import nodes_plan, round_launch, round_params, round_resources
from distbench.nodes.scale import BENCHMARK as NODES_BENCHMARK
from distbench.nodes.scale import message as nodes_scale_message

NODES = nodes_plan(config, PLAN["gpus"])
NODES_DIR = results("nodes/{backend}/n{nodes}/{mode}/round{round}")
NODES_ROUNDS = {str(r.index): r for r in NODES.rounds}

# Before the first job, as the benchmark estimate (rules/common.smk): this plan's rounds and their
# time, and the same on paper at 8, 64 and 1,000 nodes (distbench.nodes.scale).
if workflow.is_main_process and NODES.backend:
    print(nodes_scale_message(config, NODES), file=sys.stderr)


def nodes_csvs(wildcards=None):
    return [f"{NODES_DIR}/nodes.csv".format(**NODES.wildcards(r)) for r in NODES.rounds]


def nodes_report_inputs(wildcards=None):
    """The node-pair tables and heat maps, when nodes.enabled plans rounds."""
    if not NODES.backend:
        return {}
    return {
        "nodes_scores": results("tables/nodes_scores.csv"),
        "nodes_figures": results("figures_nodes"),
    }


def nodes_round_params(wildcards):
    return round_params(config, NODES, NODES_ROUNDS[wildcards.round])


def nodes_resource(key):
    return lambda wc: round_resources(config, NODES)[key]
