#!/usr/bin/env bash
# Time to an answer on a lent 2-GPU machine in one call (device tool, carry .whl; at most ~9 minutes):
#   1. `snakemake --cores 1 quick` in a fresh checkout, timed (the quick answer);
#   2. then `snakemake --cores 1` (the default full run, reusing the quick jobs), timed, cut at
#      FULL_LIMIT_S (default 390 s) so the call ends in time; whatever finished has its wall time
#      (Snakemake's benchmark files) and its fixed-cost breakdown (placement.json);
#   3. the estimate for what is left (`snakemake -n`), from those per-job times.
# Results: $OUT/time_to_answer.txt, $OUT/quick.md, $OUT/jobs.csv, $OUT/tta.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
T=$OUT/time_to_answer.txt
{ /usr/bin/time -f "quick: %e s wall" timeout 200 python3 -m snakemake --cores 1 quick > "$OUT/quick.log" 2>&1; } 2>> "$T"
grep -h "^distbench: .*planned" "$OUT/quick.log" | head -2 >> "$T"
cp report/quick.md "$OUT/" 2>/dev/null
{ /usr/bin/time -f "full after quick: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-390}" python3 -m snakemake --cores 1 > "$OUT/full.log" 2>&1; } 2>> "$T"
grep -h "^distbench: .*planned\|^distbench: to run" "$OUT/full.log" | head -2 >> "$T"
tail -n 3 "$OUT/full.log" >> "$T"
python3 -m snakemake -n --cores 1 2>&1 | grep "^distbench:" >> "$T"
python3 benchmarks/runs/jobs_table.py "$R" > "$OUT/jobs.csv"
cat "$T"; column -s, -t "$OUT/jobs.csv" | head -40
tar czf /tmp/tta.tgz results report .snakemake/log 2>/dev/null; mv /tmp/tta.tgz "$OUT/"
