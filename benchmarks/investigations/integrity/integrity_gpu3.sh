#!/usr/bin/env bash
# Issue 8, third GPU call: graph anatomy (c10d vs raw NCCL in the same kind of CUDA graph, node
# counts), then latency_run.sh (nccl-tests + graph-latency variants) on the same machine.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/integrity3; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
timeout 120 python3 -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/graph_anatomy.py "$W/anatomy" \
  > "$W/anatomy.log" 2>&1 || echo "anatomy rc=$?"
grep -v "Warning\|warn\|^\s*return\|^W1" "$W/anatomy.log" | tail -n 25
OUT=$W/latency timeout 330 bash benchmarks/runs/latency_run.sh > "$W/latency_run.log" 2>&1
echo "latency_run rc=$?"; tail -n 8 "$W/latency_run.log"
tar czf "$OUT/integrity3.tgz" -C /tmp integrity3
