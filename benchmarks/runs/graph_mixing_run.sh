#!/usr/bin/env bash
# Where our CUDA-graph small-message time goes, on a lent 2-GPU machine in one call
# (device tool, carry .fetched; about 3 minutes). Every variant is all_reduce float32 8 B - 1 MiB,
# 20 ops captured in one graph, 10 launches per trial, one process per GPU:
#   - nccl-tests (MPI build, mpiexec -n 2) -G 10, NCCL_GRAPH_MIXING_SUPPORT unset and =0;
#   - the raw-NCCL control (raw_nccl_ctypes.py, no torch) under torchrun and under mpiexec;
#     with torch in the process (+ the same raw ops captured by torch.cuda.graph); each graph's nodes;
#     and all of that again with NCCL_GRAPH_MIXING_SUPPORT=0;
#   - our comm job (graph and events) under torchrun, default and NCCL_GRAPH_MIXING_SUPPORT=0.
#   bash benchmarks/runs/graph_mixing_run.sh      -> $OUT/comparison.txt, $OUT/mixing.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/mixing; rm -rf "$W"; mkdir -p "$W"/{nt,raw,ours}
GL=benchmarks/investigations/graph-latency
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
TR=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"; } | tee "$W/env.txt"

stamp "build nccl-tests all_reduce_perf with MPI"
BIN=""; MPIEXEC=""
if BUILD_DIR=/tmp/nt-build timeout 200 bash tools/nccl_tests_build.sh > "$W/build.log" 2>&1; then
  BIN=$(sed -n 's/^NCCL_TESTS_BIN=//p' "$W/build.log" | tail -n1); MPIEXEC=$(sed -n 's/^MPIEXEC=//p' "$W/build.log" | tail -n1)
  NT_LD=$(. /tmp/nt-build/env.sh && echo "$LD_LIBRARY_PATH")
else echo "build FAILED"; tail -n 20 "$W/build.log"; fi
read -r NCCL_LIB CUDART_LIB < <(python3 - <<'PY'
import torch
torch.zeros(1, device="cuda")
libs = {}
for line in open("/proc/self/maps"):
    p = line.split()[-1]
    for k in ("libnccl.so", "libcudart.so"):
        if k in p.rsplit("/", 1)[-1] and p.startswith("/"):
            libs.setdefault(k, p)
print(libs.get("libnccl.so", "-"), libs.get("libcudart.so", "-"))
PY
)
RAW=($GL/raw_nccl_ctypes.py --nccl-lib "$NCCL_LIB" --cudart-lib "$CUDART_LIB" --out "$W/raw")
OURS=(-m distbench.comm --backend nccl --ops all_reduce --sizes 8,1KiB,64KiB,1MiB --timing events,graph
      --graph-launches 10 --iters 20 --warmup 5 --trials 10 --rank-agg avg)

for mix in default 0; do
  if [ $mix = default ]; then unset NCCL_GRAPH_MIXING_SUPPORT; sfx=""; else export NCCL_GRAPH_MIXING_SUPPORT=0; sfx="_mix0"; fi
  stamp "NCCL_GRAPH_MIXING_SUPPORT=$mix"
  if [ -n "$BIN" ]; then
    LD_LIBRARY_PATH=$NT_LD timeout 60 "$MPIEXEC" -n 2 "$BIN" -b 8 -e 1M -f 2 -n 20 -w 5 -N 5 -G 10 > "$W/nt/mpi2_all_reduce_G10$sfx.txt" 2>&1
    echo "  nccl-tests rc=$?"
  fi
  timeout 90 "${TR[@]}" "${RAW[@]}" --label "torchrun_plain$sfx" > "$W/raw/torchrun_plain$sfx.log" 2>&1; echo "  raw torchrun rc=$?"
  [ -n "$MPIEXEC" ] && { timeout 90 "$MPIEXEC" -n 2 python3 "${RAW[@]}" --label "mpiexec_plain$sfx" > "$W/raw/mpiexec_plain$sfx.log" 2>&1; echo "  raw mpiexec rc=$?"; }
  timeout 120 "${TR[@]}" "${RAW[@]}" --label "torchrun_with_torch$sfx" --with-torch > "$W/raw/torchrun_with_torch$sfx.log" 2>&1; echo "  raw with torch rc=$?"
  timeout 120 "${TR[@]}" "${OURS[@]}" --out "$W/ours/small_torchrun$sfx.csv" > "$W/ours/small_torchrun$sfx.log" 2>&1; echo "  ours rc=$?"
  grep -h "nodes:" "$W"/raw/*$sfx.log 2>/dev/null | grep "rank 0" | sed "s/^/  /"
done
unset NCCL_GRAPH_MIXING_SUPPORT
stamp "comparison"
python3 $GL/layouts_compare.py "$W" 2>&1 | tee "$OUT/comparison.txt"
cp "$W/env.txt" "$OUT/"
tar czf /tmp/mixing.tgz -C "$W" . && mv /tmp/mixing.tgz "$OUT/"
stamp done
