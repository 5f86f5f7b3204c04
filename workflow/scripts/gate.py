import sys

from distbench.gate.cli import main
from distbench.launch.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
args = ["--csv", sm.output[0], "--out", sm.params.out, "--load-s", str(sm.params.load_s)]
args += ["--gpus", str(sm.params.gpus)] if sm.params.gpus else []
for run in sm.params.baseline:
    args += ["--baseline", run]
args += ["--prom", sm.params.prom] if sm.params.prom else []
with logged(sm.log[0]):
    code = main(args)  # the verdict line goes to the log; gate.csv holds every check and the verdict
verdict = [ln for ln in open(sm.log[0]).read().splitlines() if ln.startswith("distbench gate: ")]
print("\n".join(verdict[:1]) or f"distbench gate: exit {code}", file=sys.stderr)  # Snakemake's own output shows it
