#!/usr/bin/env bash
# The prediction's check on a lent 4-GPU machine (device tool, carry .whl): the comm family at 2 and 4 ranks
# (benchmarks/runs/configs/comm-predict-4gpu.yaml) through the pipeline's `comm` target, then the
# alpha-beta fit on the 2-rank sweep checked against the 4-rank one and the cluster predictions
# (python -m distbench.predict.model). Tables land in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
cat "$OUT/versions.txt" >> "$OUT/gpus.txt"
rm -rf results report .snakemake
t0=$(date +%s)
timeout "${PIPELINE_S:-480}" python3 -m snakemake comm --cores 1 -k --configfile benchmarks/runs/configs/comm-predict-4gpu.yaml \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
cp $R/tables/comm*.csv "$OUT/" 2>/dev/null
python3 -m distbench.predict.model $R/tables/comm_summary.csv --out-dir "$OUT/predict" 2>&1 | tail -20
for f in $R/logs/comm/*/*/*/*.log; do echo "$f: $(tail -n1 "$f")"; done > "$OUT/jobs.txt"
