from pathlib import Path

from distbench.predict.tables import main
from distbench.launch.in_rule import run_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
argv = [sm.input.comm, "--preset", sm.params.preset, "--gpus", ",".join(map(str, sm.params.gpu_counts)),
        "--out-dir", str(Path(sm.output.fits).parent)]
if sm.input.get("training_summary"):
    argv += ["--training", sm.input.training_summary]
run_in_rule(sm.log[0], main, argv)
