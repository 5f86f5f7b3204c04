#!/usr/bin/env bash
# The confirmed largest batch on a lent 1x H200 (device tool; no wheel: PYTHONPATH=. from the repository root):
# "the largest batch runs a real training step; the next one up runs out of memory".
#   1. the memory job alone: gpt 1.3b, DDP, world size 1, with the default run's settings (its arguments
#      come from the plan itself: distbench.memory.plan + job for config {backends: [nccl]} on one GPU);
#   2. the training job alone (its arguments from the training plan: gpt, plain DDP, one rank, the
#      default run's settings, its warm-up and timed steps included; only the batch differs) at the
#      batch the memory job confirmed and at the next batch up.
# $OUT gets 7 files: memory.csv/.log, training_b<B>.csv/.log for both batches, summary.txt (also printed).
#
#   bash benchmarks/runs/memory_confirm_gpu.sh
#
# On CPU (a check of the plumbing only: no device limit, so no search and nothing confirmed):
#   MEMORY_CONFIRM_CPU=1 FOUND_BATCH=4 OUT=/tmp/mc bash benchmarks/runs/memory_confirm_gpu.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the device tool brings back at most 8 files from $OUT: the placement records stay outside it
PLACEMENT=$(mktemp -d); trap 'rm -rf "$PLACEMENT"' EXIT
CPU=${MEMORY_CONFIRM_CPU:-0}
if [ "$CPU" = 1 ]; then BACKEND=gloo GPUS=0; else BACKEND=nccl GPUS=1; fi

if [ "$CPU" != 1 ]; then nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
git log -1 --format='commit %h %s' 2>/dev/null; git status --short -- distbench 2>/dev/null | head -n 20

plan_args() {  # family batch out_csv placement: the job's arguments, one per line, from the default plan
  python3 - "$BACKEND" "$GPUS" "$@" <<'EOF'
import sys

backend, gpus, family, batch, out, placement = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
try:
    import jsonschema  # noqa: F401 - check_config's, which the lent image lacks

    from distbench.pipeline.config import check_config
except ImportError as e:
    check_config = None
    print(f"no plan here ({e}): the default run's arguments as the plan gave them for gpt on one GPU "
          "(distbench.memory/training plan, config {backends: [nccl]}, 2026-11-29)", file=sys.stderr)
if check_config is None:  # the same values, typed out: keep them in step with the plan if it changes
    shape = ["--seq-len", "1024", "--vocab-size", "50304", "--gpt-size", "1.3b"]
    if family == "memory":
        args = ["--backend", backend, "--model", "gpt", "--strategy", "ddp", "--gradient-as-bucket-view", "false",
                "--dtype", "bfloat16", "--optimizer", "adamw", "--batch-sizes", "1,2,4,8", "--search", "true",
                "--search-max-batch", "65536", "--config-label", "ddp", "--op-timeout-s", "300", *shape,
                "--out", out, "--placement-out", placement]
    else:
        args = ["--backend", backend, "--model", "gpt", "--strategy", "ddp", *shape, "--compile", "false",
                "--batch-size", batch, "--scaling", "weak", "--global-batch-size", batch, "--dtype", "bfloat16",
                "--optimizer", "adamw", "--bucket-cap-mb", "25.0", "--gradient-as-bucket-view", "false",
                "--static-graph", "false", "--broadcast-buffers", "true", "--comm-hook", "none", "--grad-accum", "1",
                "--warmup-steps", "5", "--steps", "20", "--allreduce-trials", "10", "--config-label", "plain",
                "--nccl-env-label", "default", "--op-timeout-s", "300", "--out", out, "--placement-out", placement]
elif family == "memory":
    from distbench.memory.job import memory_args
    from distbench.memory.plan import memory_jobs, memory_params

    cfg = check_config({"backends": [backend]})
    jobs, _ = memory_jobs(cfg, gpus)
    job = next(j for j in jobs if (j.model, j.config_label, j.world_size) == ("gpt", "ddp", 1))
    args = memory_args(job, memory_params(cfg, job), out, placement)
else:  # the training job at `batch` per rank, otherwise the default run's
    from distbench.training.job import training_args
    from distbench.training.plan import training_jobs, training_params

    on = "gpu" if backend == "nccl" else "cpu"
    cfg = check_config({"backends": [backend], "training": {"lm": {on: {"batch_size": int(batch)}}}})
    jobs, _ = training_jobs(cfg, gpus)
    job = next(j for j in jobs if (j.model, j.strategy, j.world_size, j.compile) == ("gpt", "ddp", 1, False))
    args = training_args(job, training_params(cfg, job), out, placement)
print("\n".join(map(str, args)))
EOF
}

run_job() {  # name module limit_s args...: one torchrun rank, its log beside its CSV
  local name=$1 module=$2 limit=$3; shift 3
  local t0; t0=$(date +%s)
  timeout "$limit" python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m "$module" "$@" \
    > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? in $(( $(date +%s) - t0 )) s"; grep "distbench:" "$OUT/$name.log" | tail -n 20
}

mapfile -t MEM < <(plan_args memory 0 "$OUT/memory.csv" "$PLACEMENT/memory.json")
[ "${#MEM[@]}" -gt 0 ] || { echo "no memory job in the plan"; exit 1; }
echo "memory job: ${MEM[*]}"
run_job memory distbench.memory 480 "${MEM[@]}"

# the batch the memory job confirmed (its largest `confirm` row that ran ok)
FOUND=$(python3 - "$OUT/memory.csv" <<'EOF'
import sys

from distbench.memory.contract import read_memory_csv

df = read_memory_csv(sys.argv[1])
ok = df[(df["phase"] == "confirm") & (df["status"] == "ok")]
print(int(ok["batch_size"].max()) if len(ok) else "")
EOF
)
if [ "$CPU" = 1 ]; then FOUND=${FOUND:-${FOUND_BATCH:?on CPU the memory job searches nothing: give FOUND_BATCH}}; fi
if [ -z "$FOUND" ]; then echo "the memory job confirmed no batch: see $OUT/memory.log"; exit 1; fi
echo "confirmed largest batch: $FOUND per rank"

for B in "$FOUND" $(( FOUND + 1 )); do
  mapfile -t TR < <(plan_args training "$B" "$OUT/training_b$B.csv" "$PLACEMENT/training_b$B.json")
  [ "${#TR[@]}" -gt 0 ] || { echo "no training job in the plan"; exit 1; }
  echo "training job at batch $B: ${TR[*]}"
  run_job "training_b$B" distbench.training 420 "${TR[@]}"
done

python3 - "$OUT" "$FOUND" <<'EOF' | tee "$OUT/summary.txt"
import sys
from pathlib import Path

import pandas as pd

from distbench.core.sizes import human_bytes
from distbench.memory.contract import read_memory_csv

out, found = Path(sys.argv[1]), int(sys.argv[2])


def size(v):
    return "-" if v is None or pd.isna(v) else human_bytes(int(v))


mem = read_memory_csv(out / "memory.csv")
print("memory job (gpt 1.3b, DDP, 1 GPU, the default run's settings):")
for _, r in mem.iterrows():
    extra = (f", a later step {size(r['steady_peak_allocated_bytes'])}, the fresh wrapper's two steps hold "
             f"{size(r['peak_allocated_bytes'] - r['steady_peak_allocated_bytes'])} more"
             if r["phase"] == "measure" and pd.notna(r["steady_peak_allocated_bytes"]) else "")
    print(f"  {r['phase']:8s} batch {r['batch_size']!s:>5}: {r['status']:7s} peak {size(r['peak_allocated_bytes'])} "
          f"allocated, {size(r['peak_reserved_bytes'])} reserved{extra}"
          + (f" ({str(r['message'])[:120]})" if r["message"] else ""))
print(f"training job (the training family's real step, fresh DDP, {found} = the confirmed batch):")
for b in (found, found + 1):
    path = out / f"training_b{b}.csv"
    if not path.exists():
        print(f"  batch {b}: no CSV (see training_b{b}.log)")
        continue
    t = pd.read_csv(path)
    for phase, g in t.groupby("phase", sort=False):
        status = ",".join(sorted(set(g["status"].astype(str))))
        msg = next((m for m in g["message"].dropna().astype(str) if m), "")
        print(f"  batch {b} {phase:12s}: {status:7s} peak {size(g['peak_mem_allocated_bytes'].max())} allocated, "
              f"{size(g['peak_mem_reserved_bytes'].max())} reserved" + (f" ({msg[:120]})" if msg else ""))
EOF
ls -la "$OUT"
