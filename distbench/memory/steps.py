"""The memory family's rules that read tables, as its manifest's `steps` name them (rules/families.smk
builds each rule; distbench.pipeline.run_rules.run_step calls these)."""

from __future__ import annotations

from distbench.launch.in_rule import figures_in_rule, run_in_rule


def aggregate(sm) -> None:
    """A corrupt cached job CSV ends the rule with a message naming it (log + stderr, exit 1)."""
    from distbench.memory.analysis.summary import aggregate_memory

    run_in_rule(sm.log[0], aggregate_memory, list(sm.input.jobs), sm.output.raw, sm.output.summary)


def plot(sm) -> None:
    from distbench.memory.analysis.plots import plot_memory

    figures_in_rule(sm, plot_memory, "raw")
