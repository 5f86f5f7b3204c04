import sys

from distbench.gate.cli import DEFAULT_BUDGET_S, EXIT_FAIL, EXIT_PASS, main
from distbench.gate.inputs import min_budget_s
from distbench.launch.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
# the budget: the gate's default, or the least its health load (config health.load_s) leaves room for
budget = max(DEFAULT_BUDGET_S, min_budget_s(float(sm.params.load_s)))
args = ["--csv", sm.output[0], "--out", sm.params.out, "--load-s", str(sm.params.load_s), "--budget-s", str(budget)]
args += ["--host-lock", sm.params.host_lock]
args += ["--gpus", str(sm.params.gpus)] if sm.params.gpus else []
for run in sm.params.baseline:
    args += ["--baseline", run]
args += ["--prom", sm.params.prom] if sm.params.prom else []
with logged(sm.log[0]):
    code = main(args)  # the verdict line goes to the log; gate.csv holds every check and the verdict
verdict = [ln for ln in open(sm.log[0]).read().splitlines() if ln.startswith("distbench gate: ")]
print("\n".join(verdict[:1]) or f"distbench gate: exit {code}", file=sys.stderr)  # Snakemake's own output shows it
if code not in (EXIT_PASS, EXIT_FAIL):  # a FAIL is the table's verdict; the gate's own error fails the rule
    sys.exit(f"distbench error: the node gate ended with exit {code}, no verdict (see {sm.log[0]})")
