#!/usr/bin/env bash
# The measurements that would settle the prediction self-check's open causes, on a lent 4-GPU machine
# (device tool, kind nvidia-h200-x4, carry .whl): benchmarks/runs/configs/predict-settle-4gpu.yaml through the
# pipeline's `comm` target (its probe writes the 4-rank NCCL log with INIT,GRAPH,TUNING), then the self-check of
# the new table (fit at 2 ranks, check at 4, per NCCL setting). Tables, the NCCL log and the check land in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
cat "$OUT/versions.txt" >> "$OUT/gpus.txt"
rm -rf results report .snakemake
t0=$(date +%s)
timeout "${PIPELINE_S:-540}" python3 -m snakemake comm --cores 1 -k --configfile benchmarks/runs/configs/predict-settle-4gpu.yaml \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
cp $R/tables/comm_summary.csv "$OUT/" 2>/dev/null
log=$(ls $R/probe/nccl_logs/*.log 2>/dev/null | head -n 1)
[ -n "$log" ] && cp "$log" "$OUT/nccl-4rank.log"
python3 - "$OUT" <<'PY'
import sys
from pathlib import Path

import pandas as pd

from distbench.predict import selfcheck as S

out = Path(sys.argv[1])
c = S.check_table(pd.read_csv(out / "comm_summary.csv"), "settle", envelope=False)
c.to_csv(out / "settle_selfcheck.csv", index=False)
print(S.summarize(c, by=("op", "nccl_env")).round(1).to_string())
PY
