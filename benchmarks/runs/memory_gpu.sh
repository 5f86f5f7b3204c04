#!/usr/bin/env bash
# The memory family on a lent GPU (device tool, carry .whl): memory jobs run directly with torchrun (one GPU):
# gpt 1.3b (seq 1024, bf16 autocast, fused AdamW) under DDP at batch 1-8 with the largest-batch
# search; the default MLP (4096x8, fp32, AdamW) at batch 128-1024 with a memory snapshot of the
# largest batch; gpt again with gradient_as_bucket_view (no search). Each job has its own time limit
# so the call fits what was left of the session's device time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
job() {  # name limit_s args...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m distbench.memory --backend nccl \
    --out "$OUT/$name.csv" --placement-out /tmp/p.json "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? in $(( $(date +%s) - t0 )) s"; grep "distbench:" "$OUT/$name.log" | tail -n 12
}
GPT=(--model gpt --gpt-size 1.3b --seq-len 1024 --vocab-size 50304 --dtype bfloat16 --optimizer adamw --batch-sizes 1,2,4,8)
job memory_gpt_ddp 110 "${GPT[@]}" --config-label ddp
job memory_mlp_ddp 40 --model mlp --hidden-dim 4096 --num-layers 8 --dtype float32 --optimizer adamw \
  --batch-sizes 128,256,512,1024 --search false --config-label ddp --snapshot-out "$OUT/memory_mlp_snapshot.pickle"
job memory_gpt_ddp_gbv 45 "${GPT[@]}" --gradient-as-bucket-view true --search false --config-label ddp+gbv
ls -la "$OUT"
