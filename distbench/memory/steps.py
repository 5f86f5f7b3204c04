"""The memory family's rules that read tables, as its manifest's `steps` name them (rules/families.smk
builds each rule; distbench.pipeline.run_rules.run_step calls these)."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.in_rule import logged, run_in_rule


def aggregate(sm) -> None:
    """A corrupt cached job CSV ends the rule with a message naming it (log + stderr, exit 1)."""
    from distbench.memory.analysis.summary import aggregate_memory

    run_in_rule(sm.log[0], aggregate_memory, list(sm.input.jobs), sm.output.raw, sm.output.summary)


def plot(sm) -> None:
    import pandas as pd

    from distbench.memory.analysis.plots import plot_memory

    with logged(sm.log[0]):
        out = Path(sm.output.figures)
        out.mkdir(parents=True, exist_ok=True)
        for path in plot_memory(pd.read_csv(sm.input.raw), out):
            print(path)
