from pathlib import Path

import pandas as pd

from distbench.training.analysis.plots import plot_training
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    out = Path(sm.output[0])
    out.mkdir(parents=True, exist_ok=True)
    for path in plot_training(pd.read_csv(sm.input.summary), out):
        print(path)
