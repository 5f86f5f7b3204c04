from distbench.core.io import atomic_write_json
from distbench.probes.env import collect_env
from distbench.launch.in_rule import logged

with logged(snakemake.log[0]):  # noqa: F821 - injected by Snakemake
    atomic_write_json(snakemake.output[0], collect_env())  # noqa: F821
