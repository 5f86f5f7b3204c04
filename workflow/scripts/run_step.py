from distbench.pipeline.run_rules import run_step

# Every rule a family's manifest declares as a step (rules/families.smk): its entry, "module:function".
run_step(snakemake)  # noqa: F821 - injected by Snakemake
