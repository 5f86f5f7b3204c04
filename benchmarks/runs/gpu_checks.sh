#!/usr/bin/env bash
# Fault and variant checks on a lent 2-GPU machine: in-place variants, an NCCL setting under which
# one op has no algorithm (NCCL_ALGO=Tree: all_gather), and a size no GPU can allocate.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
run() { python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl "$@" 2>&1 | grep -v "^W1\|measuring" | tail -5; }
run --ops all_gather,reduce_scatter --sizes 1MiB,64MiB,1GiB --timing events,graph --inplace false,true --out "$OUT/inplace.csv"
NCCL_ALGO=Tree run --ops all_reduce,all_gather,broadcast --sizes 1MiB --timing events --out "$OUT/tree.csv"
run --ops all_reduce --sizes 8,200GiB,1MiB --timing events --out "$OUT/oom.csv"
for f in inplace tree oom; do echo "== $f"; python3 - "$OUT/$f.csv" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["op", "size_bytes", "timing", "inplace"]).agg(us=("time_us", "median"), busbw=("busbw_gbps", "median"),
      status=("status", "first"), correct=("correct", "first"), msg=("message", "first")).to_string(max_colwidth=90))
PY
done
