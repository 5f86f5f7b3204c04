#!/usr/bin/env bash
# Our comm job and nccl-tests in the same process layouts, on a lent 2-GPU machine in one call
# (device tool, carry .fetched: the nccl-tests source and PyPI's mpich wheel; about 8-9 minutes):
#
#   bash benchmarks/runs/nccl_layouts_run.sh
#
# 1. builds every nccl-tests *_perf with MPI from the mpich wheel (tools/nccl_tests_build.sh);
# 2. small-message all_reduce (8 B - 1 MiB, float32), graph (-G 10) and eager (-G 0):
#    nccl-tests in both layouts (mpiexec -n 2: one process per GPU, as torchrun; mpiexec -n 1 -g 2:
#    one process, both GPUs), the raw-NCCL control (raw_nccl_ctypes.py: libnccl + libcudart by ctypes,
#    one stream, no torch) under torchrun and under mpiexec, the same with torch in the process
#    (+ the raw ops captured by torch.cuda.graph), and our comm job under torchrun and under mpiexec;
# 3. busbw at 32 MiB - 1 GiB for six ops: nccl-tests (mpiexec -n 2) and our comm job (events,
#    --rank-agg avg as nccl-tests' default -a 1);
# 4. training: gpt 350m (bf16, batch 8, seq 1024) and the MLP on 2 ranks, each with 3 traced steps;
# 5. layouts_compare.py prints every figure side by side with ratios -> $OUT/comparison.txt.
# Everything else comes back in $OUT/layouts.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/layouts; rm -rf "$W"; mkdir -p "$W"/{nt,raw,ours}
GL=benchmarks/investigations/graph-latency
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
time_left() { [ $(( $(date +%s) - T0 )) -lt "$1" ] || { echo "  skipped: over $1 s into the run"; return 1; }; }
TR=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)

stamp machine
{
  date -u; hostname
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'gpus', torch.cuda.device_count())"
  nproc; git log -1 --format='distbench %H' 2>/dev/null
} > "$W/env.txt" 2>&1
cat "$W/env.txt"

stamp "build nccl-tests with MPI (log: build.log)"
BIN=""; MPIEXEC=""
if NCCL_TESTS_OPS="all_reduce all_gather reduce_scatter broadcast alltoall sendrecv" BUILD_DIR=/tmp/nt-build timeout 300 bash tools/nccl_tests_build.sh > "$W/build.log" 2>&1; then
  BIN=$(sed -n 's/^NCCL_TESTS_BIN=//p' "$W/build.log" | tail -n1)
  MPIEXEC=$(sed -n 's/^MPIEXEC=//p' "$W/build.log" | tail -n1)
  grep '^nccl_tests_build:' "$W/build.log"
  # shellcheck disable=SC1091
  NT_LD=$(. /tmp/nt-build/env.sh && echo "$LD_LIBRARY_PATH")
else
  echo "build FAILED rc=$?"; tail -n 30 "$W/build.log"
fi
ND=$(dirname "${BIN:-/x/x}")

read -r NCCL_LIB CUDART_LIB < <(python3 - <<'PY'
import torch
torch.cuda.init(); torch.zeros(1, device="cuda")
libs = {}
for line in open("/proc/self/maps"):
    p = line.split()[-1]
    for k in ("libnccl.so", "libcudart.so"):
        if k in p.rsplit("/", 1)[-1] and p.startswith("/"):
            libs.setdefault(k, p)
print(libs.get("libnccl.so", "-"), libs.get("libcudart.so", "-"))
PY
)
echo "libnccl: $NCCL_LIB  libcudart: $CUDART_LIB"

nt() {  # nt NAME NPROC BINARY ARGS...: one nccl-tests run -> $W/nt/NAME.txt
  local name=$1 np=$2 exe=$3; shift 3
  [ -x "$ND/$exe" ] && [ -n "$MPIEXEC" ] || { echo "  skip $name (no $exe / mpiexec)"; return; }
  LD_LIBRARY_PATH=$NT_LD NCCL_DEBUG=VERSION timeout 60 "$MPIEXEC" -n "$np" "$ND/$exe" "$@" > "$W/nt/$name.txt" 2>&1
  echo "  $name rc=$? ($exe $*)"
}

stamp "small messages: nccl-tests, both layouts"
for g in 10 0; do
  nt "mpi2_all_reduce_G$g" 2 all_reduce_perf -b 8 -e 1M -f 2 -n 20 -w 5 -N 5 -G $g
  nt "mpi1g2_all_reduce_G$g" 1 all_reduce_perf -b 8 -e 1M -f 2 -n 20 -w 5 -N 5 -G $g -g 2
done

stamp "small messages: raw-NCCL control"
if [ "$NCCL_LIB" != "-" ] && [ "$CUDART_LIB" != "-" ]; then
  RAW=($GL/raw_nccl_ctypes.py --nccl-lib "$NCCL_LIB" --cudart-lib "$CUDART_LIB" --out "$W/raw")
  timeout 90 "${TR[@]}" "${RAW[@]}" --label torchrun_plain > "$W/raw/torchrun_plain.log" 2>&1; echo "  torchrun_plain rc=$?"
  [ -n "$MPIEXEC" ] && { timeout 90 "$MPIEXEC" -n 2 python3 "${RAW[@]}" --label mpiexec_plain > "$W/raw/mpiexec_plain.log" 2>&1; echo "  mpiexec_plain rc=$?"; }
  timeout 120 "${TR[@]}" "${RAW[@]}" --label torchrun_with_torch --with-torch > "$W/raw/torchrun_with_torch.log" 2>&1; echo "  torchrun_with_torch rc=$?"
  grep -h "rank 0" "$W"/raw/*.log | grep -v Warning
fi

stamp "small messages: our comm job"
OURS=(-m distbench.comm --backend nccl --ops all_reduce --sizes 8,1KiB,64KiB,1MiB --timing events,graph
      --graph-launches 10 --iters 20 --warmup 5 --trials 10 --rank-agg avg)
timeout 120 "${TR[@]}" "${OURS[@]}" --out "$W/ours/small_torchrun.csv" > "$W/ours/small_torchrun.log" 2>&1; echo "  torchrun rc=$?"
timeout 120 "${TR[@]}" "${OURS[@]}" --rotate-bytes 0 --out "$W/ours/small_norotate.csv" > "$W/ours/small_norotate.log" 2>&1; echo "  torchrun no-rotation rc=$?"
[ -n "$MPIEXEC" ] && { timeout 120 "$MPIEXEC" -n 2 bash $GL/pmi_as_torchrun.sh python3 "${OURS[@]}" --out "$W/ours/small_mpiexec.csv" > "$W/ours/small_mpiexec.log" 2>&1; echo "  mpiexec rc=$?"; }

stamp "large messages: nccl-tests (mpiexec -n 2) and our comm job"
time_left 380 && for pair in all_reduce:all_reduce_perf all_gather:all_gather_perf reduce_scatter:reduce_scatter_perf \
            broadcast:broadcast_perf all_to_all:alltoall_perf send_recv:sendrecv_perf; do
  nt "mpi2_${pair%%:*}_large" 2 "${pair#*:}" -b 32M -e 1G -f 2 -n 20 -w 5 -N 3
done
time_left 400 && timeout 150 "${TR[@]}" -m distbench.comm --backend nccl --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv \
  --sizes 32MiB,64MiB,128MiB,256MiB,512MiB,1GiB --timing events --iters 20 --warmup 5 --trials 5 --rank-agg avg \
  --out "$W/ours/large.csv" > "$W/ours/large.log" 2>&1; echo "  ours large rc=$?"

stamp "training step splits with traces (gpt 350m bf16 b8 s1024, MLP): profiled vs unprofiled steps"
mkdir -p "$W/train"
time_left 470 && timeout 75 "${TR[@]}" -m distbench.training --backend nccl --model gpt --gpt-size 350m --dtype bfloat16 --batch-size 8 \
  --seq-len 1024 --steps 20 --warmup-steps 5 --out "$W/train/gpt.csv" --profile-dir "$W/train/gpt_trace" --profile-steps 3 \
  > "$W/train/gpt.log" 2>&1; echo "  gpt rc=$?"
time_left 530 && timeout 40 "${TR[@]}" -m distbench.training --backend nccl --model mlp --steps 20 --warmup-steps 5 --out "$W/train/mlp.csv" \
  --profile-dir "$W/train/mlp_trace" --profile-steps 3 > "$W/train/mlp.log" 2>&1; echo "  mlp rc=$?"

stamp "comparison"
python3 $GL/layouts_compare.py "$W" 2>&1 | tee "$OUT/comparison.txt"
stamp done
cp "$W/env.txt" "$OUT/"
tar czf /tmp/layouts.tgz -C "$W" . && mv /tmp/layouts.tgz "$OUT/"
