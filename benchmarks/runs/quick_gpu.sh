#!/usr/bin/env bash
# The quick answer on a GPU host: `snakemake --cores 1 quick` from a fresh checkout, timed,
# then what a full run would still do (-n). Run from the repository root (device tool: carry .whl).
# Where the time goes: $OUT/rule_times.csv (every step, from Snakemake's console log) and $OUT/jobs.csv
# (each benchmark job's start-up, measurement and teardown).
set -uo pipefail
source benchmarks/runs/device_setup.sh
{ /usr/bin/time -f "quick: %e s wall" python3 -m snakemake --cores 1 quick > "$OUT/quick.log" 2>&1; } 2> "$OUT/quick_time.txt"
cat "$OUT/quick_time.txt"; tail -20 "$OUT/quick.log"
cp report/quick.md "$OUT/" 2>/dev/null
python3 benchmarks/runs/rule_times.py "$OUT/quick.log" > "$OUT/rule_times.csv" 2> "$OUT/rule_times.err"
python3 benchmarks/runs/jobs_table.py "$R" > "$OUT/jobs.csv"
cat "$OUT/rule_times.csv" "$OUT/jobs.csv"  # the lent image has no column(1)
grep -h "exit 0 after" "$R"/logs/comm/*/*/*/*.log "$R"/logs/training/*/*/*/*.log "$R"/logs/probe/*.log 2>/dev/null | tee "$OUT/job_times.txt"
python3 -m snakemake -n --cores 1 2>&1 | sed -n '/Job stats/,/^$/p;/^total/p' | head -30 | tee "$OUT/full_dry_run.txt"
