#!/usr/bin/env bash
# The split's rules checked on LoRA (rank 16 on GPT 1.3b, training.lm.gpu defaults: seq 1024, batch 8/rank,
# bf16, AdamW) under DDP and FSDP, whose splits did not add up in ../instep-workflow-h100x2-2026-11-27
# (the profiler slowed their traced steps). Inspector loaded as the launcher sets it. Output: lora.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
bash tools/nccl_inspector_build.sh > /tmp/inspector_build.log 2>&1 || { tail -20 /tmp/inspector_build.log; exit 1; }
for s in ddp fsdp; do
  d=/tmp/lora/lora_$s; rm -rf "$d"; mkdir -p "$d"
  envs=(env $(python3 -c "from distbench.training.job import inspector_env as e; print(' '.join(f'{k}={v}' for k, v in e('$d/inspect', 'nccl').items()))"))
  args=(--backend nccl --model lora --gpt-size 1.3b --seq-len 1024 --vocab-size 50304 --batch-size 8 --dtype bfloat16
        --optimizer adamw --strategy $s --config-label $s --out "$d/training.csv" --placement-out "$d/placement.json"
        --inspect-dir "$d/inspect" --inspect-steps 3)
  echo "+ ${envs[*]} torchrun --standalone --nproc_per_node=2 -m distbench.training ${args[*]}" > "$d/command.txt"
  timeout 75 "${envs[@]}" torchrun --standalone --nproc_per_node=2 -m distbench.training "${args[@]}" > "$d/log.txt" 2>&1
  echo "lora_$s rc $?"; grep -E "median step" "$d/log.txt"
done
tar czf "$OUT/lora.tgz" -C /tmp lora
