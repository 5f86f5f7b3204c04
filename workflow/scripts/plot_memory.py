from pathlib import Path

import pandas as pd

from distbench.memory.analysis.plots import plot_memory
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    out = Path(sm.output[0])
    out.mkdir(parents=True, exist_ok=True)
    for path in plot_memory(pd.read_csv(sm.input.raw), out):
        print(path)
