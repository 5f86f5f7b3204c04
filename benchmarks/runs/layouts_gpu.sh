#!/usr/bin/env bash
# Issue 49 on a lent multi-GPU machine (device tool, carry .whl): GPT (training.lm.gpu.size, default
# 1.3b) under every layout (ddp, fsdp, hsdp, fsdp_tp) at the node's full world size, through the
# workflow (`snakemake --cores 1`, training only), timed against the estimate it printed; the report's
# Verdict rows and training tables. Results under $OUT: layouts.txt, run.tgz (results/, report/).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
N=$(nvidia-smi -L | grep -c '^GPU ')
T=$OUT/layouts.txt
CFG="backends=[nccl] comm={ops: [all_reduce], sizes: [8, 1GiB]} memory={enabled: false} training={models: [gpt], lm: {strategies: [ddp, fsdp, hsdp, fsdp_tp], world_sizes: [$N]${LM_EXTRA:+, $LM_EXTRA}}}"
echo "# snakemake --cores 1 --config $CFG" > "$T"
{ /usr/bin/time -f "run: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-500}" python3 -m snakemake --cores 1 --config "backends=[nccl]" "comm={ops: [all_reduce], sizes: [8, 1GiB]}" "memory={enabled: false}" "training={models: [gpt], lm: {strategies: [ddp, fsdp, hsdp, fsdp_tp], world_sizes: [$N]${LM_EXTRA:+, $LM_EXTRA}}}" > "$OUT/full.log" 2>&1; } 2>> "$T"
grep -h "^distbench: " "$OUT/full.log" | head -6 >> "$T"
tail -n 3 "$OUT/full.log" >> "$T"
echo "# training_summary.csv (layout columns)" >> "$T"
python3 - "$R" >> "$T" 2>&1 <<'PY'
import sys, pandas as pd
d = pd.read_csv(f"{sys.argv[1]}/tables/training_summary.csv")
cols = [c for c in ("model", "strategy", "world_size", "shard_size", "tp_size", "batch_size", "status", "tokens_per_s_median",
                    "step_time_ms_median", "mfu", "peak_mem_gib", "peak_memory_mib_max", "message") if c in d]
print(d[cols].to_string())
PY
echo "# Verdict rows (report.md)" >> "$T"
grep -i -A12 "^## Verdict" report/report.md | head -20 >> "$T"
cat "$T"
tar czf /tmp/run.tgz results report 2>/dev/null; mv /tmp/run.tgz "$OUT/"
