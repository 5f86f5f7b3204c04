#!/usr/bin/env bash
# Issue 40, the MLP under FSDP (device tool, kind nvidia-h100-x2, carrying .whl and .fetched/nccl-inspector):
# NCCL's Inspector built by tools/nccl_inspector_build.sh; the comm family's standalone all_gather and
# reduce_scatter in fp32 at 8-128 MiB (the MLP's FSDP collectives: 64 MiB per block, 16 MiB the root),
# events timing, in the same call; then the MLP (training.gpu defaults: 4096 x 8, batch 512, fp32, SGD)
# under FSDP2 with --inspect-dir and Inspector loaded by the environment the launcher sets
# (distbench.training.job.inspector_env). Outputs: mlp_fsdp.tgz and misc.tgz in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
W=/tmp/instep; rm -rf "$W"; mkdir -p "$W"
bash tools/nccl_inspector_build.sh > "$W/inspector_build.log" 2>&1 || { tail -20 "$W/inspector_build.log"; exit 1; }
nvidia-smi -q -d CLOCK,POWER > "$W/nvidia_smi_clocks_power.txt" 2>&1
for op in all_gather reduce_scatter; do
  timeout 120 torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend nccl --ops "$op" --dtype float32 \
    --sizes 8MiB,16MiB,32MiB,64MiB,128MiB --timing events --warmup 5 --iters 20 --trials 5 \
    --out "$W/comm_${op}_float32.csv" > "$W/comm_${op}_float32.log" 2>&1; echo "comm $op rc $?"
done
d="$W/mlp_fsdp"; mkdir -p "$d"
envs=(env $(python3 -c "from distbench.training.job import inspector_env as e; print(' '.join(f'{k}={v}' for k, v in e('$d/inspect', 'nccl').items()))"))
args=(--backend nccl --model mlp --strategy fsdp --hidden-dim 4096 --num-layers 8 --batch-size 512 --dtype float32
      --optimizer sgd --warmup-steps 5 --steps 20 --allreduce-trials 10 --config-label fsdp
      --out "$d/training.csv" --placement-out "$d/placement.json" --inspect-dir "$d/inspect" --inspect-steps 3)
echo "+ ${envs[*]} torchrun --standalone --nproc_per_node=2 -m distbench.training ${args[*]}" > "$d/command.txt"
timeout 240 "${envs[@]}" torchrun --standalone --nproc_per_node=2 -m distbench.training "${args[@]}" > "$d/log.txt" 2>&1
echo "mlp_fsdp rc $?"; grep -E "median step|bucket|Inspector|inspect:" "$d/log.txt" | head -8
tar czf "$OUT/mlp_fsdp.tgz" -C "$W" mlp_fsdp
tar czf "$OUT/misc.tgz" -C "$W" inspector_build.log nvidia_smi_clocks_power.txt $(cd "$W" && ls comm_*)
ls -la "$OUT"
