#!/usr/bin/env bash
# all_to_all_v by traffic matrix on a lent 4-GPU machine (device tool, carry .whl): the pipeline's `report` target with
# benchmarks/runs/configs/comm-a2av-4gpu.yaml (all_to_all_v by traffic matrix, the GPU-pair matrix and
# the arrival record). Tables, figures and the report come back in one archive under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
t0=$(date +%s)
timeout ${A2AV_TIMEOUT:-500} python3 -m snakemake report --cores 1 -k --configfile benchmarks/runs/configs/comm-a2av-4gpu.yaml \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 2 "$OUT/snakemake.log"
mkdir -p "$OUT/tables" "$OUT/figures" "$OUT/logs"
cp $R/tables/*.csv $R/probe/topology.json "$OUT/tables/" 2>/dev/null
cp $R/logs/comm/nccl/float32/*/default.log "$OUT/logs/" 2>/dev/null
for ws in 2 4; do cp $R/comm/nccl/float32/ws$ws/default/comm_ranks.csv "$OUT/tables/comm_ranks_ws$ws.csv"; done
cp $R/figures_pairs/*.png "$OUT/figures/" 2>/dev/null
cp report/report.md "$OUT/" 2>/dev/null
sed -n '/## all_to_all_v by traffic/,/^## Training\|^## Measurements/p' report/report.md | head -30
grep -h "GPU-pair\|Straggler" report/report.md | head -3
# archived outside $OUT, so tar never reads the archive it is writing ("file changed as we read it")
tar czf /tmp/a2av-run.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/a2av-run.tgz "$OUT/"
