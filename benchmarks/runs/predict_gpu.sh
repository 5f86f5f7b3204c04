#!/usr/bin/env bash
# The prediction's check on a lent 4-GPU machine (device tool, carry .whl): the comm family at 2 and 4 ranks
# (CONFIG, by default benchmarks/runs/configs/comm-predict-4gpu.yaml) through the pipeline's `comm` target, then the
# alpha-beta fit on the 2-rank sweep checked against the 4-rank one and the cluster predictions
# (python -m distbench.predict.model), and the self-check of NCCL's calibrated model on the new table
# (benchmarks/runs/predict_selfcheck_comm.py --table). Tables, the probe's NCCL log and the check land in $OUT.
# CONFIG=benchmarks/runs/configs/predict-settle-4gpu.yaml runs what would settle the self-check's open causes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
cat "$OUT/versions.txt" >> "$OUT/gpus.txt"
rm -rf results report .snakemake
t0=$(date +%s)
timeout "${PIPELINE_S:-480}" python3 -m snakemake comm --cores 1 -k \
  --configfile "${CONFIG:-benchmarks/runs/configs/comm-predict-4gpu.yaml}" \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
cp $R/tables/comm*.csv "$OUT/" 2>/dev/null
python3 -m distbench.predict.model $R/tables/comm_summary.csv --out-dir "$OUT/predict" 2>&1 | tail -20
for f in $R/logs/comm/*/*/*/*.log; do echo "$f: $(tail -n1 "$f")"; done > "$OUT/jobs.txt"
log=$(ls $R/probe/nccl_logs/*.log 2>/dev/null | head -n 1)  # NCCL's INIT,GRAPH,TUNING lines, largest world size
[ -n "$log" ] && cp "$log" "$OUT/nccl.log"
python3 benchmarks/runs/predict_selfcheck_comm.py --table $R/tables/comm_summary.csv --out "$OUT/selfcheck" 2>&1 | tail -40
