"""The node rounds' rules that read tables, as the manifest's `steps` name them (rules/families.smk
builds each rule; distbench.pipeline.run_rules.run_step calls these)."""

from __future__ import annotations

from distbench.launch.in_rule import figures_in_rule, run_in_rule

LIMITS = ("slow_latency", "slow_bandwidth", "slow_share")


def limits(config, _plan) -> dict:
    return {k: v for k, v in config["nodes"].items() if k in LIMITS}


def aggregate(sm) -> None:
    """A corrupt cached round CSV ends the rule with a message naming it (log + stderr, exit 1)."""
    from distbench.nodes.analysis.summary import write_tables

    run_in_rule(sm.log[0], write_tables, list(sm.input.rounds), sm.output.raw, sm.output.pairs, sm.output.scores,
                {"nodes": dict(sm.params.limits)})


def plot(sm) -> None:
    from distbench.nodes.analysis.plots import plot_nodes

    figures_in_rule(sm, plot_nodes, "pairs")
