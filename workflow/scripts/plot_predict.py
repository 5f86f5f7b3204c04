from distbench.predict.plots import write_predict_figures
from distbench.launch.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
run_in_rule(sm.log[0], write_predict_figures, sm.input.validation, sm.input.comm, sm.input.training, sm.output[0])
