#!/usr/bin/env bash
# Issue 40 evidence (device tool, kind nvidia-h100-x2, carrying .whl and .fetched/nccl-inspector): NCCL's
# Inspector built by tools/nccl_inspector_build.sh; the achievable matmul peak of each GPU at the
# models' GEMMs (distbench.training.matmul); the comm family's standalone all_reduce / all_gather /
# reduce_scatter at 1 MiB-512 MiB (distbench.comm, the standalone figures); then the training jobs
# with --inspect-dir (Inspector loaded by the environment, as distbench.training.job.inspector_env
# sets it), GPT 1.3b (config.yaml's training.lm.gpu defaults) under DDP and FSDP and the MLP
# (training.gpu defaults) under DDP, and GPT DDP once more without --inspect-dir and without
# Inspector (what inspecting costs the timed step). Outputs: one .tgz per job and misc.tgz in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
W=/tmp/instep; rm -rf "$W"; mkdir -p "$W"
bash tools/nccl_inspector_build.sh > "$W/inspector_build.log" 2>&1 || { tail -20 "$W/inspector_build.log"; exit 1; }
pip list 2>/dev/null | grep -i -E "^(torch|nvidia-nccl|pynvml|nvidia-ml-py) " > "$W/pip.txt"
nvidia-smi -q -d CLOCK,POWER > "$W/nvidia_smi_clocks_power.txt" 2>&1
# the achievable peak: GPT 1.3b (dim 2048, 8 x 1024 tokens, vocab 50304) in bf16, the MLP (4096, batch 512) in fp32
python3 -m distbench.training.matmul --dtype bfloat16 --out "$W/matmul_gpt_bf16.csv" \
  $(python3 -c "from distbench.training.matmul import gemm_shapes as g; print(' '.join('--gemm %dx%dx%d' % s for s in g('gpt', {'hidden_dim': 2048, 'seq_len': 1024, 'vocab_size': 50304}, 8)))")
python3 -m distbench.training.matmul --dtype float32 --out "$W/matmul_mlp_fp32.csv" \
  $(python3 -c "from distbench.training.matmul import gemm_shapes as g; print(' '.join('--gemm %dx%dx%d' % s for s in g('mlp', {'hidden_dim': 4096}, 512)))")
# the standalone figures (the comm family's harness, events timing)
for spec in "all_reduce float32" "all_gather bfloat16" "reduce_scatter float32" "all_gather float32"; do
  set -- $spec
  timeout 300 torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend nccl --ops "$1" --dtype "$2" \
    --sizes 1MiB,2MiB,4MiB,8MiB,16MiB,32MiB,64MiB,128MiB,256MiB,512MiB --timing events --warmup 5 --iters 20 --trials 5 \
    --out "$W/comm_$1_$2.csv" > "$W/comm_$1_$2.log" 2>&1; echo "comm $1 $2 rc $?"
done
gpt="--model gpt --gpt-size 1.3b --seq-len 1024 --vocab-size 50304 --batch-size 8 --dtype bfloat16 --optimizer adamw"
mlp="--model mlp --hidden-dim 4096 --num-layers 8 --batch-size 512 --dtype float32 --optimizer sgd"
job() {  # name, inspect (1/0), harness args...
  local name=$1 insp=$2; shift 2; local d="$W/$name"; mkdir -p "$d"
  local extra=() envs=()
  if [ "$insp" = 1 ]; then
    extra=(--inspect-dir "$d/inspect" --inspect-steps 3)
    # the launcher's environment for this job (distbench.training.job.inspector_env; it makes the dump dir)
    envs=(env $(python3 -c "from distbench.training.job import inspector_env as e; print(' '.join(f'{k}={v}' for k, v in e('$d/inspect', 'nccl').items()))"))
  fi
  echo "+ ${envs[*]} torchrun --standalone --nproc_per_node=2 -m distbench.training --backend nccl $* --out $d/training.csv --placement-out $d/placement.json ${extra[*]}" > "$d/command.txt"
  timeout 420 "${envs[@]}" torchrun --standalone --nproc_per_node=2 -m distbench.training --backend nccl "$@" \
    --out "$d/training.csv" --placement-out "$d/placement.json" "${extra[@]}" > "$d/log.txt" 2>&1
  echo "$name rc $?"; grep -E "median step|bucket|Inspector|inspect:" "$d/log.txt" | head -8
}
job gpt_ddp 1 $gpt --strategy ddp
job gpt_fsdp 1 $gpt --strategy fsdp
job mlp_ddp 1 $mlp --strategy ddp
job gpt_ddp_plain 0 $gpt --strategy ddp
for n in gpt_ddp gpt_fsdp mlp_ddp; do tar czf "$OUT/$n.tgz" -C "$W" "$n"; done
tar czf "$OUT/misc.tgz" -C "$W" gpt_ddp_plain inspector_build.log pip.txt nvidia_smi_clocks_power.txt $(cd "$W" && ls matmul_*.csv comm_*) 
ls -la "$OUT"
