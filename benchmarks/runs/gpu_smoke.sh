#!/usr/bin/env bash
# Quick check on a lent GPU machine before the full run: every op, every timing mode, 4 sizes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L; python3 -c "import torch, snakemake; print(torch.__version__, torch.cuda.nccl.version(), snakemake.__version__)"
time python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl \
  --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv,barrier \
  --sizes 8,1MiB,64MiB,1GiB --timing events,graph,host --dtype bfloat16 --out "$OUT/smoke.csv" \
  --placement-out "$OUT/placement.json" 2>&1 | grep -v "^W1" | tail -30
python3 - "$OUT/smoke.csv" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["op", "size_bytes", "timing"]).agg(t=("time_us", "median"), bw=("busbw_gbps", "median"),
      st=("status", "first"), msg=("message", "first")).to_string())
PY
python3 -m distbench.probes.nccl_probe --world-size 2 --ops all_reduce,all_gather --out "$OUT/nccl.json" --log-dir /tmp/nccl_logs
python3 -m distbench.probes probe-topology > "$OUT/topology.json"; python3 -m distbench.probes nvlink > "$OUT/nvlink.json"
head -c 600 "$OUT/nvlink.json"; echo
