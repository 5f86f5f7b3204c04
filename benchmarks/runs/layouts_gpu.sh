#!/usr/bin/env bash
# Which parallel layout, on a lent multi-GPU machine (device tool, carry .whl): GPT (training.lm.gpu.size, default
# 1.3b) under every layout (ddp, fsdp, hsdp, fsdp_tp) at the node's full world size, through the
# workflow (`snakemake --cores 1`, training only), timed against the estimate it printed; the report's
# Verdict rows and training tables. Results under $OUT: [TAG-]layouts.txt, [TAG-]run.tgz (results/, report/).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
N=$(nvidia-smi -L | grep -c '^GPU ')
# TAG names this run's files under $OUT (several runs in one call); LM_EXTRA adds training.lm keys (a
# larger size: "gpu: {size: 2.7b}"), TR_EXTRA training keys ("inspect: true": each layout's step split),
# COMM_SIZES the comm family's sizes (the in-step buckets' standalone figures interpolate between them)
P=$OUT/${TAG:+$TAG-}  # this run's files under $OUT
T=${P}layouts.txt
COMM="comm={ops: [all_reduce], sizes: [${COMM_SIZES:-8, 1GiB}]}"
TRAIN="training={models: [gpt], ${TR_EXTRA:+$TR_EXTRA, }lm: {strategies: [ddp, fsdp, hsdp, fsdp_tp], world_sizes: [$N]${LM_EXTRA:+, $LM_EXTRA}}}"
echo "# snakemake --cores 1 --config backends=[nccl] $COMM memory={enabled: false} $TRAIN" > "$T"
{ /usr/bin/time -f "run: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-500}" python3 -m snakemake --cores 1 --config "backends=[nccl]" "$COMM" "memory={enabled: false}" "$TRAIN" > "${P}full.log" 2>&1; } 2>> "$T"
grep -h "^distbench: " "${P}full.log" | head -6 >> "$T"
tail -n 3 "${P}full.log" >> "$T"
echo "# training_summary.csv (layout columns)" >> "$T"
python3 - "$R" >> "$T" 2>&1 <<'PY'
import sys, pandas as pd
d = pd.read_csv(f"{sys.argv[1]}/tables/training_summary.csv")
cols = [c for c in ("model", "strategy", "world_size", "shard_size", "tp_size", "batch_size", "status", "tokens_per_s_median",
                    "step_time_ms_median", "mfu", "peak_mem_allocated_bytes", "message") if c in d]
print(d[cols].to_string())
PY
if [ -f "$R/tables/training_split.csv" ]; then
  echo "# training_split.csv (the step split per job)" >> "$T"
  python3 - "$R" >> "$T" 2>&1 <<'PY'
import sys, pandas as pd
d = pd.read_csv(f"{sys.argv[1]}/tables/training_split.csv")
print(d[[c for c in ("job", "step_ms", "step_trace_ms", "compute_ms", "compute_slowdown_ms", "exposed_comm_ms", "rest_ms",
                     "rest_host_gaps_ms", "rest_unexplained_ms", "adds_up") if c in d]].to_string())
PY
fi
echo "# Verdict rows (report.md)" >> "$T"
grep -i -A12 "^## Verdict" report/report.md | head -20 >> "$T"
cat "$T"
# the traces (inspect/*/*.json.gz) stay behind: too large to bring back; their figures are in the tables
tar czf /tmp/run.tgz --exclude="*.json.gz" results report 2>/dev/null; mv /tmp/run.tgz "${P}run.tgz"
