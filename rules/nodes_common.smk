# The node-pair rounds' helpers of rules/nodes.smk (functions apart from rules, as rules/common.smk:
# Snakemake's lint). The rounds are the plan's (distbench.nodes.plan, through make_plan); distbench.nodes
# holds the logic.
from distbench.nodes.plan import round_launch, round_params, round_resources
from distbench.nodes.scale import message as nodes_scale_message

NODES = PLAN["nodes_plan"]
NODES_ROUNDS = {str(r.index): r for r in NODES.rounds}

# Before the first job, as the benchmark estimate (rules/common.smk): this plan's rounds and their
# time, and the same on paper at 8, 64 and 1,000 nodes (distbench.nodes.scale).
if workflow.is_main_process and NODES.backend:
    print(nodes_scale_message(config, NODES), file=sys.stderr)


def nodes_round_params(wildcards):
    return round_params(config, NODES, NODES_ROUNDS[wildcards.round])


def nodes_resource(key):
    return lambda wc: round_resources(config, NODES)[key]
