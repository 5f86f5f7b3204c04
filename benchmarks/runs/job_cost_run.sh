#!/usr/bin/env bash
# Per-job fixed cost on a lent 2-GPU machine in one call (device tool, carry .fetched: .fetched/old is
# `git archive <commit before the change> distbench`; about 6 minutes):
#   1. per-job fixed cost by piece, trivial jobs of each family, torchrun's agent against ranks
#      started directly, and the older checkout's total wall time (job_cost.py);
#   2. the same comm and gpt jobs in both launch modes, alternating: do the figures move? (same_figures.py)
#   bash benchmarks/runs/job_cost_run.sh      -> $OUT/job_cost.csv, $OUT/same_figures.txt, $OUT/job_cost.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/jobcost; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"; } | tee "$OUT/env.txt"
stamp "python -c 'import torch' and with CUDA initialised, 3 times each"
for i in 1 2 3; do
  /usr/bin/time -f "import torch: %e s" python3 -c "import torch" 2>&1 | tail -1
  /usr/bin/time -f "import torch + cuda init: %e s" python3 -c "import torch; torch.zeros(1, device='cuda')" 2>&1 | tail -1
done | tee "$W/imports.txt"
stamp "job_cost.py (nccl, 2 reps, new: torchrun and direct; old: torchrun)"
OLD=()
[ -d .fetched/old/distbench ] && OLD=(--old-tree .fetched/old)
timeout 330 python3 benchmarks/investigations/job-cost/job_cost.py --backend nccl --reps 2 --jobs comm_ws2,training_ws2,memory_ws1 \
  "${OLD[@]}" --out "$OUT/job_cost.csv" > "$W/job_cost.log" 2>&1; echo "  rc=$?"
python3 - "$OUT/job_cost.csv" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
cols = [c for c in d.columns if c.endswith("_s")]
print(d.groupby(["job", "tree", "mode"])[cols].median().round(2).T.to_string())
PY
stamp "same_figures.py (both modes, alternating)"
timeout 200 python3 benchmarks/investigations/job-cost/same_figures.py --out-dir "$W/figures" --reps 2 > "$OUT/same_figures.txt" 2>&1
echo "  rc=$?"; cat "$OUT/same_figures.txt" | tail -40
stamp done
cp "$W/imports.txt" "$W/job_cost.log" "$OUT/" 2>/dev/null
tar czf /tmp/jc.tgz -C "$W" . && mv /tmp/jc.tgz "$OUT/job_cost.tgz"
