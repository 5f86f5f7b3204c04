#!/bin/bash
# Both test commands, each with a per-test wall/CPU log (cpu_per_test_plugin.py) and /usr/bin/time -v: /tmp/tt/<fast|heavy>{.out,.time,/cpu_*.tsv}, /tmp/tt/summary.
cd "${REPO:-/work/main}"
INV=${REPO:-/work/main}/benchmarks/investigations/test-time-2026-11-28
export DISTBENCH_REQUIRE_BROWSER=1 DISTBENCH_REQUIRE_SLURM=1 DISTBENCH_REQUIRE_SSH=1
for kind in fast heavy; do
  mkdir -p /tmp/tt/$kind
  if [ $kind = fast ]; then m="not heavy"; else m="heavy"; fi
  s=$(date +%s)
  PYTHONPATH=$INV DISTBENCH_CPU_LOG_DIR=/tmp/tt/$kind /usr/bin/time -v -o /tmp/tt/$kind.time python -m pytest -n 2 -m "$m" -q -p cpu_per_test_plugin -p no:cacheprovider > /tmp/tt/$kind.out 2>&1
  echo "$kind rc=$? wall=$(( $(date +%s) - s ))" >> /tmp/tt/summary
  uptime >> /tmp/tt/summary
done
