#!/usr/bin/env bash
# The report on a lent GPU machine (device tool, carry .whl): the pipeline's default target with
# $CONFIG (default benchmarks/runs/configs/report-4gpu.yaml); the report, the tables and the run's
# tables + run.json (to copy into another results/) come back in one archive under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
t0=$(date +%s)
CONFIG=${CONFIG:-benchmarks/runs/configs/report-4gpu.yaml}
timeout ${REPORT_TIMEOUT:-540} python3 -m snakemake --cores 1 -k --configfile "$CONFIG" \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
R=$(ls -d results/*/ | head -n 1); R=${R%/}  # the one run (its config may name it)
echo "results/ holds: $(ls results)"; python3 -m snakemake -n --cores 1 --configfile "$CONFIG" 2>&1 | tail -n 2  # cached: nothing to do
mkdir -p "$OUT/tables"
cp $R/tables/*.csv "$OUT/tables/" 2>/dev/null
mkdir -p "$OUT/run" && cp -r $R/tables $R/run.json "$OUT/run/" 2>/dev/null  # the run, to copy into another results/
cp -r report "$OUT/" 2>/dev/null
sed -n '/^## Verdict/,/^## Findings/p' report/report.md
# archived outside $OUT, so tar never reads the archive it is writing ("file changed as we read it")
tar czf /tmp/report-run.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/report-run.tgz "$OUT/"
