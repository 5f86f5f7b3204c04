#!/usr/bin/env bash
# training.inspect through the workflow on a lent 2-GPU machine (device tool, kind nvidia-h100-x2, carrying .whl
# and .fetched/nccl-inspector): NCCL's Inspector built by tools/nccl_inspector_build.sh, then the default
# run with training.inspect and training.matmul_sweep on:
#   snakemake --cores 1 --config 'training={inspect: true, matmul_sweep: true}'
# Outputs in $OUT: run.log (Snakemake's output), report.md, the in-step tables (training_instep.csv,
# training_split.csv, training_matmul.csv), training_summary.csv, jobs.txt (each job's time).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
t0=$(date +%s)
bash tools/nccl_inspector_build.sh > "$OUT/inspector_build.log" 2>&1 || { tail -20 "$OUT/inspector_build.log"; exit 1; }
echo "inspector built in $(( $(date +%s) - t0 )) s" | tee "$OUT/times.txt"
t0=$(date +%s)
timeout 520 python3 -m snakemake --cores 1 --config 'training={inspect: true, matmul_sweep: true}' > "$OUT/run.log" 2>&1
echo "snakemake exit $?, wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
cp report/report.md "$OUT/report.md" 2>/dev/null
for t in training_instep training_split training_matmul training_summary; do cp "$R/tables/$t.csv" "$OUT/" 2>/dev/null || echo "no $t.csv" | tee -a "$OUT/times.txt"; done
find "$R/benchmarks" -name '*.tsv' -exec sh -c 'printf "%s %s\n" "$1" "$(tail -1 "$1" | cut -f1)"' _ {} \; | sed "s#$R/benchmarks/##" | sort > "$OUT/jobs.txt"
ls "$R/training"/*/*/*/*/inspect/inspector 2>/dev/null | head -20 > "$OUT/inspector_files.txt"
tail -5 "$OUT/run.log"
