#!/usr/bin/env bash
# The control for the one training figure that moved between the old (5a8a229) and the new workflow in
# the same-machine default runs: lora under FSDP at 2 ranks. Each tree runs that job alone (no shared
# launch: batch_launch=false), old and new alternating, REPS times, on one lent 2-GPU machine (device
# tool; carry .whl and .old, the old tree as `git archive 5a8a229` in .old/old.tgz). Out: $OUT/alone.csv
# (tree, rep, the job's median, p5 and p95 step time) and each run's log tail.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
NEW=$PWD
mkdir -p /tmp/old && tar xzf .old/old.tgz -C /tmp/old && cp -r .whl /tmp/old/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
echo "tree,rep,step_time_ms_median,step_time_ms_p5,step_time_ms_p95,n_steps" > "$OUT/alone.csv"
for rep in $(seq 1 "${REPS:-2}"); do
  for tree in old new; do
    dir=$NEW; [ $tree = old ] && dir=/tmp/old
    (cd "$dir" && export PYTHONPATH=/tmp/site:$dir DISTBENCH_RUN_LABEL=ctl \
      && rm -rf results/ctl/training/nccl/lora/ws2/fsdp \
      && timeout 240 python3 -m snakemake --cores 1 results/ctl/training/nccl/lora/ws2/fsdp/training.csv \
           --config batch_launch=false > "$OUT/$tree-$rep.log" 2>&1
      python3 - "$tree" "$rep" results/ctl/training/nccl/lora/ws2/fsdp/training.csv >> "$OUT/alone.csv" <<'PY'
import sys
import pandas as pd
tree, rep, path = sys.argv[1:4]
df = pd.read_csv(path)
t = df[(df["phase"] == "step") & (df["status"] == "ok")]["step_time_ms"]
print(f"{tree},{rep},{t.median():.3f},{t.quantile(0.05):.3f},{t.quantile(0.95):.3f},{len(t)}")
PY
    )
    tail -n 3 "$OUT/$tree-$rep.log" > "$OUT/$tree-$rep.tail"; rm -f "$OUT/$tree-$rep.log"
  done
done
cat "$OUT/alone.csv"
