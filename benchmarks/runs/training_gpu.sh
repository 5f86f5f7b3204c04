#!/usr/bin/env bash
# Training and its tuning on a lent GPU machine (device tool, carry .whl): a direct 2-rank training job first
# (stops here if the harness fails on CUDA; DIRECT=0 skips it), then the pipeline with the tuning
# config $CONFIG (default: the 2-GPU one). KEEP=1 keeps earlier results (a second config on the
# same warm machine then reuses the cached jobs).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
export DISTBENCH_RUN_LABEL="${DISTBENCH_RUN_LABEL:-$(python3 -c 'from distbench.core.run_label import default_label; print(default_label())')}"
R="results/$DISTBENCH_RUN_LABEL"  # where the pipeline writes (results/<run label>/)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
CONFIG=${CONFIG:-benchmarks/runs/configs/training-tune-2gpu.yaml}
if [ "${DIRECT:-1}" = 1 ]; then
t0=$(date +%s)
timeout 120 python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.training --backend nccl \
  --hidden-dim 4096 --num-layers 8 --batch-size 512 --warmup-steps 5 --steps 20 --out "$OUT/direct.csv" \
  --placement-out /tmp/p.json > "$OUT/direct.log" 2>&1
rc=$?; echo "direct 2-rank job rc=$rc in $(( $(date +%s) - t0 )) s"; grep -v "^W1\|Warning\|warn" "$OUT/direct.log" | tail -n 12
[ $rc = 0 ] || exit 1
fi
[ "${KEEP:-0}" = 1 ] || rm -rf results report/report.md report/report.html report/figures .snakemake
t0=$(date +%s)
timeout "${PIPELINE_S:-420}" python3 -m snakemake --cores 1 -k --configfile "$CONFIG" \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/snakemake.log"
ls $R/training/nccl/*/ | head -50 | tr '\n' ' '; echo
if [ ! -f $R/tables/training_summary.csv ]; then  # cut short: aggregate what finished
  python3 -c "
import glob; from distbench.training.analysis.summary import aggregate_training
aggregate_training(sorted(glob.glob('$R/training/*/*/*/training.csv')), '$R/tables/training.csv', '$R/tables/training_summary.csv')"
fi
python3 - <<PY
import pandas as pd
s = pd.read_csv("$R/tables/training_summary.csv")
cols = ["world_size", "config", "step_time_ms_median", "compute_only_ms_median", "allreduce_alone_ms_median",
        "last_bucket_ms_median", "exposed_comm_ms", "tail_comm_ms", "compute_slowdown_ms", "overlap_fraction", "samples_per_s_median",
        "efficiency_vs_plain_1gpu", "efficiency_vs_own_1gpu", "bounds_ok", "status"]
pd.set_option("display.width", 250); pd.set_option("display.max_columns", 20)
print(s[cols].sort_values(["world_size", "efficiency_vs_plain_1gpu"]).round(3).to_string(index=False))
PY
cp $R/tables/training*.csv "$OUT/" 2>/dev/null
tar czf "$OUT/training-results.tgz" results report 2>/dev/null
