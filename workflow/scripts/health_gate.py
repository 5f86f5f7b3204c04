import sys

from distbench.core.io import atomic_write_text
from distbench.launch.in_rule import run_in_rule
from distbench.health.table import read_health_csv, rows_of, stop_reason

sm = snakemake  # noqa: F821 - injected by Snakemake


def gate() -> str | None:
    # a health CSV that cannot be read ends the rule with its message, never a traceback (run_in_rule)
    reason = stop_reason(rows_of(read_health_csv(sm.input[0])), stop_on_failing=True)
    print(reason or "no failing item: the benchmarks may run")
    if not reason:
        atomic_write_text(sm.output[0], "passed\n")
    return reason


reason = run_in_rule(sm.log[0], gate)
if reason:
    sys.exit(reason)  # stderr, outside the log: Snakemake's own output shows it
