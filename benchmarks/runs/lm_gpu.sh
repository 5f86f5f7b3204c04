#!/usr/bin/env bash
# Language models on a lent GPU machine (device tool, carry .whl). MFU=1: one-GPU gpt 1.3b jobs for the MFU
# target (seq 1024, bf16 autocast, fused AdamW; torch.compile at batch 24, eager at 24 and 16).
# Then the pipeline with $CONFIG (KEEP=1 keeps earlier results, so a second config on the same warm
# machine reuses cached jobs). Summary tables land in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
export DISTBENCH_RUN_LABEL="${DISTBENCH_RUN_LABEL:-$(python3 -c 'from distbench.core.run_label import default_label; print(default_label())')}"
R="results/$DISTBENCH_RUN_LABEL"  # where the pipeline writes (results/<run label>/)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
mfu_job() {  # name compile batch [bucket-view]
  local t0=$(date +%s)
  timeout 300 python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m distbench.training --backend nccl \
    --model gpt --gpt-size 1.3b --seq-len 1024 --vocab-size 50304 --batch-size "$3" --dtype bfloat16 \
    --optimizer adamw --compile "$2" --warmup-steps 5 --steps 20 --allreduce-trials 5 --config-label "$1" --gradient-as-bucket-view "${4:-false}" \
    --out "$OUT/$1.csv" --placement-out /tmp/p.json > "$OUT/$1.log" 2>&1
  echo "$1: rc=$? in $(( $(date +%s) - t0 )) s"; grep "distbench:" "$OUT/$1.log" | grep -v placement | tail -n 7
}
if [ "${MFU:-1}" = 1 ]; then
  mfu_job mfu_compile_b24 true 24
  mfu_job mfu_eager_b24 false 24
  mfu_job mfu_eager_b16 false 16
elif [ "${MFU:-1}" = 3 ]; then  # the loss compiled too (no fp32 logits copy), bucket view: batch 24 fits
  mfu_job mfu_compile_gbv_b24 true 24 true
  mfu_job mfu_compile_gbv_b20 true 20 true
  mfu_job mfu_compile_gbv_b16 true 16 true
  mfu_job mfu_eager_gbv_b16 false 16 true
elif [ "${MFU:-1}" = 2 ]; then  # batch 24 did not fit beside DDP's buckets: compile at 16 and 20
  mfu_job mfu_compile_b16 true 16
  mfu_job mfu_compile_b20 true 20
fi
if [ -n "${CONFIG:-}" ]; then
  [ "${KEEP:-0}" = 1 ] || rm -rf results report/report.md report/report.html report/figures .snakemake
  t0=$(date +%s)
  timeout "${PIPELINE_S:-420}" python3 -m snakemake --cores 1 -k --configfile "$CONFIG" > "$OUT/snakemake.log" 2>&1
  echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
  if [ ! -f $R/tables/training_summary.csv ]; then  # cut short: aggregate what finished
    python3 -c "
import glob; from distbench.training.analysis.summary import aggregate_training
aggregate_training(sorted(glob.glob('$R/training/*/*/*/*/training.csv')), '$R/tables/training.csv', '$R/tables/training_summary.csv')"
  fi
  python3 - <<PY
import pandas as pd
s = pd.read_csv("$R/tables/training_summary.csv")
cols = ["model", "strategy", "world_size", "step_time_ms_median", "compute_only_ms_median", "comm_alone_ms_median",
        "exposed_comm_ms", "overlap_fraction", "tokens_per_s_median", "tflops_per_device", "mfu",
        "efficiency_vs_plain_1gpu", "efficiency_vs_own_1gpu", "grad_bytes", "params_trainable", "attention_kernel",
        "peak_mem_allocated_bytes", "bounds_ok", "status"]
pd.set_option("display.width", 250); pd.set_option("display.max_columns", 30)
print(s[cols].round(3).to_string(index=False))
PY
  cp $R/tables/training*.csv "$OUT/" 2>/dev/null
  grep -h "^- " report/report.md | grep -i "gpt\|lora\|MFU" > "$OUT/findings.txt" 2>/dev/null
  tar czf "$OUT/lm-results.tgz" results report 2>/dev/null
fi
