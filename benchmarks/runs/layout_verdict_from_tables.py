"""The layouts' Verdict row and figure remade by the current code from a run's committed tables:
`python3 benchmarks/runs/layout_verdict_from_tables.py DIR` reads DIR/tables/training_summary.csv (and
training_split.csv where present), prints the row and writes DIR/figures/training_layouts-now.png."""

import sys
from pathlib import Path

import pandas as pd

from distbench.training.analysis.layout_verdict import layout_rows, layout_verdict
from distbench.training.analysis.plots import fig_layouts

d = Path(sys.argv[1])
summary = pd.read_csv(d / "tables/training_summary.csv")
split = pd.read_csv(d / "tables/training_split.csv") if (d / "tables/training_split.csv").exists() else None
print(f"# python3 benchmarks/runs/layout_verdict_from_tables.py {d}")
for rows in layout_rows(summary).values():
    text, verdict, reason = layout_verdict(rows, split)
    print(f"headline: {text}\nverdict: {verdict}\nwhy: {reason}")
fig = fig_layouts(summary)
if fig is not None:
    (d / "figures").mkdir(exist_ok=True)
    fig.savefig(d / "figures/training_layouts-now.png", dpi=100, bbox_inches="tight")
