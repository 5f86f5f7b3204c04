#!/usr/bin/env bash
# The quick answer on a GPU host: `snakemake --cores 1 quick` from a fresh checkout, timed,
# then what a full run would still do (-n). Run from the repository root (device tool: carry .whl).
set -uo pipefail
source benchmarks/runs/device_setup.sh
{ /usr/bin/time -f "quick: %e s wall" python3 -m snakemake --cores 1 quick > "$OUT/quick.log" 2>&1; } 2> "$OUT/quick_time.txt"
cat "$OUT/quick_time.txt"; tail -20 "$OUT/quick.log"
cp report/quick.md "$OUT/" 2>/dev/null
grep -h "exit 0 after" "$R"/logs/comm/*/*/*/*.log "$R"/logs/training/*/*/*/*.log "$R"/logs/probe/*.log 2>/dev/null | tee "$OUT/job_times.txt"
python3 -m snakemake -n --cores 1 2>&1 | sed -n '/Job stats/,/^$/p;/^total/p' | head -30 | tee "$OUT/full_dry_run.txt"
