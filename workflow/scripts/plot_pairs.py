from pathlib import Path

from distbench.comm.analysis.pairs_plots import write_pairs_figures
from distbench.pipeline.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
Path(sm.output[0]).mkdir(parents=True, exist_ok=True)  # the rule's output, also when there is nothing to draw
run_in_rule(sm.log[0], write_pairs_figures, sm.input.pairs, sm.output[0])
