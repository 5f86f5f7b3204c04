#!/usr/bin/env bash
# Issue 8: does NCCL's legacy IPC transport (NCCL_CUMEM_ENABLE=0: P2P/IPC instead of P2P/CUMEM)
# change small-message graph latency across processes? Our harness, 1 and 10 graph launches.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=(python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl --ops all_reduce
   --sizes 8,1KiB,64KiB,1MiB --timing graph --trials 10)
for v in default:1 default:10 cumem0:1 cumem0:10; do
  e=${v%%:*}; L=${v#*:}
  if [ "$e" = cumem0 ]; then export NCCL_CUMEM_ENABLE=0; else unset NCCL_CUMEM_ENABLE; fi
  NCCL_DEBUG=INFO "${H[@]}" --graph-launches "$L" --out "$OUT/${e}_L$L.csv" > "/tmp/$e$L.log" 2>&1
  echo "$v $(grep -m1 -o 'via P2P/[A-Za-z/ ]*' "/tmp/$e$L.log")"
done
