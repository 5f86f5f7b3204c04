#!/usr/bin/env bash
# Flight Recorder's cost on a 2-GPU machine (device tool, carry .whl). The same comm job
# (all_reduce, all_gather, reduce_scatter, broadcast; 1 KiB to 256 MiB, CUDA events) and training
# job (the MLP under DDP) with DISTBENCH_FLIGHT_RECORDER=1 and =0, alternating ROUNDS times; prints
# per-op time_us and per-phase step_time_ms side by side (and writes them under $OUT).
#   bash benchmarks/runs/flight_recorder_cost.sh            # WS=2 ROUNDS=3 OUT=/tmp/out
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU: Gloo on CPU (smoke test)"
python3 -c "import torch; print('torch', torch.__version__)"
timeout "${LIMIT_S:-560}" python3 benchmarks/runs/flight_recorder_cost.py "$OUT/fr_cost" "${WS:-2}" "${ROUNDS:-3}" \
  2>&1 | tee "$OUT/flight_recorder_cost.txt"
