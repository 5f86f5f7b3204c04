#!/usr/bin/env bash
# On a lent one-GPU machine (device tool, carry .whl; one call), the two checks a single GPU can
# make besides the default run (one_gpu_gpu.sh):
#   1. memory_confirm_gpu.sh: the memory job's confirmed largest batch, and the training family's own job
#      at that batch and the next one up (the real step runs at the first and runs out of memory at the second);
#   2. layouts_compile_gpu.sh at one GPU (WORLDS=1, INSPECT=1): GPT eager and compiled, compile_time_s beside
#      each compiled job, the compiled step split from its GPU timeline.
# The device tool brings back 8 files: each part writes into its own folder, bundled into one .tgz each,
# with the summaries beside them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"
OUT=/tmp/memconfirm timeout "${MEMORY_LIMIT_S:-300}" bash benchmarks/runs/memory_confirm_gpu.sh > /tmp/memconfirm.log 2>&1
echo "memory confirm: rc $?"; tail -n 30 /tmp/memconfirm.log
cp /tmp/memconfirm/summary.txt "$FINAL/memory_confirm_summary.txt" 2>/dev/null
mv /tmp/memconfirm.log /tmp/memconfirm/ 2>/dev/null; tar czf "$FINAL/memory_confirm.tgz" -C /tmp memconfirm
OUT=/tmp/compile WORLDS=1 INSPECT=1 SIZES="${SIZES:-1.3b}" RUN_LIMIT_S="${COMPILE_LIMIT_S:-270}" \
  bash benchmarks/runs/layouts_compile_gpu.sh > /tmp/compile.log 2>&1
echo "compile at one GPU: rc $?"; tail -n 60 /tmp/compile.log
cp /tmp/compile/*-layouts.txt "$FINAL/" 2>/dev/null
mv /tmp/compile.log /tmp/compile/ 2>/dev/null; tar czf "$FINAL/compile_one_gpu.tgz" -C /tmp compile
ls -la "$FINAL"
