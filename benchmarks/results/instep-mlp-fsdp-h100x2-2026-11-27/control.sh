#!/usr/bin/env bash
# Control for the MLP FSDP step (is it host-bound?): the same job without Inspector or traces at batch 512
# (training.gpu's default) and at batch 128 (a quarter of the GPU work; FSDP's collectives and their
# count unchanged). Host-bound: the step stays near the same time; GPU-bound: it falls with the batch.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
for b in 512 128; do
  for s in fsdp ddp; do
    d=/tmp/ctl/${s}_b$b; mkdir -p "$d"
    timeout 120 torchrun --standalone --nproc_per_node=2 -m distbench.training --backend nccl --model mlp --strategy $s \
      --hidden-dim 4096 --num-layers 8 --batch-size $b --dtype float32 --optimizer sgd --warmup-steps 5 --steps 20 \
      --allreduce-trials 10 --config-label $s --out "$d/training.csv" --placement-out "$d/placement.json" > "$d/log.txt" 2>&1
    echo "$s batch $b rc $?: $(grep -E 'median step' "$d/log.txt" | tr '\n' ' ')"
  done
done | tee "$OUT/control.txt"
