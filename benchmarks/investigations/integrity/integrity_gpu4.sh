#!/usr/bin/env bash
# Issue 8, fourth GPU call: is the small-message gap to nccl-tests the process layout?
# (1) raw NCCL with both GPUs in one process, graphs captured as in our harness;
# (2) which NCCL transport each layout uses (NCCL_DEBUG=INFO): nccl-tests -g 2 vs our torchrun job.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name --format=csv,noheader
echo "== one process, two GPUs (raw NCCL, torch.cuda graphs)"
timeout 120 python3 benchmarks/investigations/graph-latency/one_process_nccl.py 2>&1 | tee "$OUT/one_process.txt" | grep -v Warn | tail -n 12
echo "== transports"
timeout 150 bash tools/nccl_tests_build.sh > /tmp/build.log 2>&1 || tail -n 5 /tmp/build.log
BIN=$(sed -n 's/^NCCL_TESTS_BIN=//p' /tmp/build.log | tail -n1)
NT_LD=$(. "$(dirname "$(dirname "$BIN")")/env.sh" && echo "$LD_LIBRARY_PATH")
LD_LIBRARY_PATH=$NT_LD NCCL_DEBUG=INFO timeout 30 "$BIN" -b 8 -e 8 -g 2 -G 10 > "$OUT/nt_info.txt" 2>&1
echo "nccl-tests -g 2:"; grep -E "via P2P|via SHM|Channel 00/0" "$OUT/nt_info.txt" | head -n 4
NCCL_DEBUG=INFO timeout 60 python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl \
  --ops all_reduce --sizes 8 --timing graph --out /tmp/x.csv > "$OUT/torch_info.txt" 2>&1
echo "torchrun (one process per GPU):"; grep -E "via P2P|via SHM|Channel 00/0" "$OUT/torch_info.txt" | head -n 4
