#!/usr/bin/env bash
# Issue 14 on a lent 4-GPU machine (device tool, carry .whl): the pipeline's default target with
# benchmarks/configs/report-4gpu.yaml; the report, the tables and the exported run come back in
# one archive under $OUT.
set -uo pipefail
source benchmarks/device_setup.sh
rm -rf results report .snakemake
t0=$(date +%s)
timeout ${REPORT_TIMEOUT:-540} python3 -m snakemake --cores 1 -k --configfile benchmarks/configs/report-4gpu.yaml \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
mkdir -p "$OUT/tables"
cp results/tables/*.csv "$OUT/tables/" 2>/dev/null
cp -r results/runs "$OUT/" 2>/dev/null
cp -r report "$OUT/" 2>/dev/null
sed -n '/^## Verdict/,/^## Findings/p' report/report.md
cd "$OUT" && tar czf report-run.tgz --exclude=report-run.tgz . && find . -mindepth 1 ! -name report-run.tgz -delete
