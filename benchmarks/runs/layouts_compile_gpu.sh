#!/usr/bin/env bash
# On a lent multi-GPU machine (device tool, carry .whl): the layouts (DDP, FSDP2, FSDP2 +
# TP 2) of GPT 1.3b and 2.7b, eager and compiled, through the pipeline (configs/layouts-compile.yaml:
# training.lm.compile [false, true]) at 2 GPUs, and at 4 where 4 GPUs are seen: tokens/s, compile_time_s
# beside each compiled job, the layouts Verdict in the compiled mode with the eager figures beside it, and
# the run's time against the estimate it printed. One run per (size, world size), each its own run label.
#   SIZES="1.3b 2.7b"  the model sizes (default both)
#   WORLDS="2 4"       the world sizes (default 2, and 4 when 4 GPUs are seen)
#   INSPECT=1          training.inspect: each job's step split from its GPU timeline (each job then launches
#                      alone; longer)
#   RUN_LIMIT_S=580    each run's wall-time limit (a lent machine allows 10 minutes per command: give one
#                      size and world size per call there, e.g. SIZES=1.3b WORLDS=2)
# Results under $OUT: <size>-ws<N>-layouts.txt (the summary), <size>-ws<N>-run.tgz (results/, report/).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
# NVLink multicast off: the lent machines need it (device_setup.sh exports the same; said here as the rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
source benchmarks/runs/device_setup.sh  # Snakemake from .whl/, $OUT made, the machine described in $OUT
N=$(nvidia-smi -L | grep -c '^GPU ')
if [ -z "${WORLDS:-}" ]; then WORLDS=2; [ "$N" -ge 4 ] && WORLDS="2 4"; fi
for SIZE in ${SIZES:-1.3b 2.7b}; do
  for WS in $WORLDS; do
    if [ "$WS" -gt "$N" ]; then echo "skip $SIZE at $WS GPUs: $N seen" | tee -a "$OUT/skipped.txt"; continue; fi
    TAG="$SIZE-ws$WS"
    T="$OUT/$TAG-layouts.txt"
    export DISTBENCH_RUN_LABEL="layouts-compile-$TAG"
    R="results/$DISTBENCH_RUN_LABEL"
    rm -rf "$R" report .snakemake
    # lm.world_sizes auto: 1 GPU (plain DDP, the baseline) and $WS, without FSDP's own 1-GPU runs
    INS=""; [ "${INSPECT:-0}" = 1 ] && INS="inspect: true, "
    TRAIN="training={${INS}lm: {gpu: {size: $SIZE}}}"
    echo "# snakemake --cores 1 --configfile benchmarks/runs/configs/layouts-compile.yaml --config world_sizes=[$WS] $TRAIN" > "$T"
    { /usr/bin/time -f "run: %e s wall (rc %x)" timeout "${RUN_LIMIT_S:-580}" python3 -m snakemake --cores 1 \
        --configfile benchmarks/runs/configs/layouts-compile.yaml --config "world_sizes=[$WS]" "$TRAIN" \
        > "$OUT/$TAG-full.log" 2>&1; } 2>> "$T"
    grep -h "^distbench: " "$OUT/$TAG-full.log" | head -6 >> "$T"  # the plan and the estimate it printed
    tail -n 3 "$OUT/$TAG-full.log" >> "$T"
    echo "# training_summary.csv: eager and compiled side by side" >> "$T"
    python3 - "$R" >> "$T" 2>&1 <<'PY'
import sys, pandas as pd
d = pd.read_csv(f"{sys.argv[1]}/tables/training_summary.csv")
cols = [c for c in ("model", "strategy", "world_size", "tp_size", "compile", "config", "status", "tokens_per_s_median",
                    "step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95", "compile_time_s", "mfu",
                    "efficiency_vs_plain_1gpu", "peak_mem_allocated_bytes", "message") if c in d]
print(d.sort_values(["world_size", "strategy", "compile"])[cols].to_string())
PY
    if [ -f "$R/tables/training_split.csv" ]; then
      echo "# training_split.csv (the step split per job, compiled jobs' from their GPU timeline)" >> "$T"
      python3 - "$R" >> "$T" 2>&1 <<'PY'
import sys, pandas as pd
d = pd.read_csv(f"{sys.argv[1]}/tables/training_split.csv")
print(d[[c for c in ("job", "step_ms", "step_trace_ms", "compute_ms", "compute_slowdown_ms", "exposed_comm_ms", "rest_ms",
                     "rest_host_gaps_ms", "rest_unexplained_ms", "adds_up") if c in d]].to_string())
PY
    fi
    echo "# Verdict rows (report.md)" >> "$T"
    grep -i -A14 "^## Verdict" report/report.md | head -22 >> "$T"
    cat "$T"
    # the traces (inspect/*/*.json.gz) stay behind: too large to bring back; their figures are in the tables
    tar czf /tmp/run.tgz --exclude="*.json.gz" "$R" report 2>/dev/null; mv /tmp/run.tgz "$OUT/$TAG-run.tgz"
  done
done
