#!/usr/bin/env bash
# Time to an answer on a lent 2-GPU machine (device tool, carry .whl; one call): the default run,
# `snakemake --cores 1` in a fresh checkout, timed, cut at FULL_LIMIT_S (default 540 s) so the call
# ends in time; every job's wall time (Snakemake's benchmark files) and fixed-cost breakdown
# (placement.json), which jobs shared a launch (distbench.launch.batch), and the estimate that was
# printed before the first job against the time the run took.
# Results: $OUT/default_run.txt, $OUT/jobs.csv, $OUT/rule_times.csv (every step's wall time, from
# Snakemake's console log: the report steps too), $OUT/run.tgz (results, report, Snakemake's log)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
T=$OUT/default_run.txt
{ /usr/bin/time -f "default run: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-540}" python3 -m snakemake --cores 1 ${EXTRA_CONFIG:+--config $EXTRA_CONFIG} > "$OUT/full.log" 2>&1; } 2>> "$T"
grep -h "^distbench: .*planned\|^distbench: to run" "$OUT/full.log" | head -2 >> "$T"
tail -n 3 "$OUT/full.log" >> "$T"
python3 -m snakemake -n --cores 1 2>&1 | grep "^distbench:" >> "$T"
python3 benchmarks/runs/jobs_table.py "$R" > "$OUT/jobs.csv"
python3 benchmarks/runs/rule_times.py "$OUT/full.log" > "$OUT/rule_times.csv" 2>> "$T"
cat "$T"; column -s, -t "$OUT/jobs.csv" | head -60
tar czf /tmp/run.tgz results report .snakemake/log 2>/dev/null; mv /tmp/run.tgz "$OUT/"
