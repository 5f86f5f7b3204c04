from pathlib import Path

import pandas as pd

from distbench.nodes.analysis.plots import plot_nodes
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    out = Path(sm.output[0])
    out.mkdir(parents=True, exist_ok=True)
    for path in plot_nodes(pd.read_csv(sm.input.pairs), out):
        print(path)
