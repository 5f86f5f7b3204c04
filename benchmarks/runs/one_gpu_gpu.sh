#!/usr/bin/env bash
# On a lent one-GPU machine (device tool, carry .whl; one call): what a new user sees on a node
# with one GPU. A fresh checkout, then
#   1. `snakemake --cores 1 quick`, timed (the quick answer's Verdict: report/quick.md);
#   2. `snakemake --cores 1`, timed, reusing the quick answer's job (the full report's Verdict);
# cut at QUICK_LIMIT_S / FULL_LIMIT_S so the call ends in time.
# Results (the device tool brings back 8 files): $OUT/quick.md, $OUT/report.md, $OUT/summary.txt (the
# machine, versions, both times, the estimate printed), $OUT/run.tgz (report.html, the run's tables, every
# job's wall time in jobs.csv, the logs, results/ without traces).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report/quick.md report/report.* .snakemake
{ /usr/bin/time -o "$OUT/quick_time.txt" -f "quick: %e s wall (rc %x)" timeout "${QUICK_LIMIT_S:-150}" python3 -m snakemake --cores 1 quick \
    > "$OUT/quick.log" 2>&1; }
cat "$OUT/quick_time.txt"; cp report/quick.md "$OUT/" 2>/dev/null
T=$OUT/default_run.txt
{ /usr/bin/time -a -o "$T" -f "default run after quick: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-400}" python3 -m snakemake --cores 1 \
    > "$OUT/full.log" 2>&1; }
grep -h "^distbench: .*planned\|^distbench: to run" "$OUT/full.log" | head -2 >> "$T"
tail -n 3 "$OUT/full.log" >> "$T"
cat "$T"
python3 benchmarks/runs/jobs_table.py "$R" > "$OUT/jobs.csv" 2>/dev/null
cp report/report.md report/report.html "$OUT/" 2>/dev/null
cp report/quick.md "$OUT/quick_after_full.md" 2>/dev/null
mkdir -p "$OUT/tables" && cp "$R"/tables/*.csv "$OUT/tables/" 2>/dev/null
sed -n '/^## Verdict/,/^## [^V]/p' report/report.md | head -30
cat "$OUT"/gpus.txt "$OUT"/versions.txt "$OUT"/quick_time.txt "$T" > /tmp/summary.txt
mkdir -p /tmp/bundle && mv "$OUT"/* /tmp/bundle/ && cp /tmp/summary.txt "$OUT/summary.txt"
cp /tmp/bundle/quick.md /tmp/bundle/report.md "$OUT/" 2>/dev/null
tar czf "$OUT/run.tgz" --exclude="*.json.gz" -C /tmp bundle -C "$PWD" results report .snakemake/log 2>/dev/null
ls -la "$OUT"
