#!/usr/bin/env bash
# Where a quick training job's set-up seconds go on a lent GPU machine (device tool, carry .whl):
# prof_training.py at 1 and 2 ranks, each rank's cProfile top 70 by cumulative time, and the bare costs
# beside it (import torch, import torch._dynamo, a CUDA context, an NCCL communicator).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
D=benchmarks/investigations/quick-time-2026-11-29
for n in 1 2; do
  mkdir -p "$OUT/ws$n"
  /usr/bin/time -f "ws$n: %e s wall" python3 -m torch.distributed.run --standalone --nproc-per-node "$n" "$D/prof_training.py" "$OUT/ws$n" > "$OUT/ws$n/log.txt" 2>&1
  tail -1 "$OUT/ws$n/log.txt"
done
python3 - <<'PY' 2>&1 | tee "$OUT/bare.txt"
import time
t = time.time(); import torch; print(f"import torch {time.time() - t:.2f} s")
t = time.time(); import torch._dynamo; print(f"import torch._dynamo {time.time() - t:.2f} s")
t = time.time(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize(); print(f"CUDA context {time.time() - t:.2f} s")
t = time.time(); a = torch.randn(256, 256, device="cuda:0"); (a @ a).sum().item(); print(f"first matmul (cuBLAS) {time.time() - t:.2f} s")
PY
for n in 1 2; do head -45 "$OUT/ws$n/rank0.txt"; done
