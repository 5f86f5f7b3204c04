#!/usr/bin/env bash
# Issue 25 on a lent 2-GPU machine in one call (device tool, carry .whl; at most ~9 minutes):
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
python3 - "$R" > "$OUT/jobs.csv" <<'PY'
import csv, glob, json, os, sys
r = sys.argv[1]
w = csv.writer(sys.stdout)
w.writerow(["job", "wall_s", "fixed_cost_s", "import_torch_s", "device_and_pg_init_s", "setup_s", "measure_s", "teardown_s"])
for tsv in sorted(glob.glob(f"{r}/benchmarks/**/*.tsv", recursive=True)):
    rows = open(tsv).read().splitlines()
    wall = rows[-1].split("\t")[0] if len(rows) > 1 else ""
    job = os.path.relpath(tsv, f"{r}/benchmarks")[:-4]
    fam, rest = job.split("/", 1)
    tl = {}
    for p in glob.glob(f"{r}/{fam}/{rest.rsplit('/', 1)[0] if fam == 'comm' else rest}*/placement.json") + glob.glob(f"{r}/{fam}/{rest}/placement.json"):
        tl = json.load(open(p)).get("provenance", {}).get("timeline", {}) or tl
    w.writerow([job, wall] + [tl.get(k, "") for k in ("fixed_cost_s", "import_torch_s", "device_and_pg_init_s", "setup_s", "measure_s", "teardown_s")])
PY
cat "$T"; column -s, -t "$OUT/jobs.csv" | head -40
tar czf /tmp/tta.tgz results report .snakemake/log 2>/dev/null; mv /tmp/tta.tgz "$OUT/"
