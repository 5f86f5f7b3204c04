#!/usr/bin/env bash
# The split's rules (the profiler's added time off the host gaps; the rank the others waited for) checked
# on GPT 1.3b under FSDP2 (training.lm.gpu defaults: seq 1024, batch 8/rank, bf16, AdamW), the job whose
# split did not add up in ../instep-h100x2-2026-11-27: the same command, Inspector loaded as the launcher
# sets it. Output: gpt_fsdp.tgz in $OUT (its traces, 4-5 MB each, are not committed).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
bash tools/nccl_inspector_build.sh > /tmp/inspector_build.log 2>&1 || { tail -20 /tmp/inspector_build.log; exit 1; }
d=/tmp/gpt_fsdp; rm -rf "$d"; mkdir -p "$d"
envs=(env $(python3 -c "from distbench.training.job import inspector_env as e; print(' '.join(f'{k}={v}' for k, v in e('$d/inspect', 'nccl').items()))"))
args=(--backend nccl --model gpt --gpt-size 1.3b --seq-len 1024 --vocab-size 50304 --batch-size 8 --dtype bfloat16
      --optimizer adamw --strategy fsdp --config-label fsdp --out "$d/training.csv" --placement-out "$d/placement.json"
      --inspect-dir "$d/inspect" --inspect-steps 3)
echo "+ ${envs[*]} torchrun --standalone --nproc_per_node=2 -m distbench.training ${args[*]}" > "$d/command.txt"
timeout 200 "${envs[@]}" torchrun --standalone --nproc_per_node=2 -m distbench.training "${args[@]}" > "$d/log.txt" 2>&1
echo "gpt_fsdp rc $?"; grep -E "median step" "$d/log.txt"
tar czf "$OUT/gpt_fsdp.tgz" -C /tmp gpt_fsdp
