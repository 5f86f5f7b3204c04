#!/usr/bin/env bash
# The busbw dips at 32-64 MiB (send_recv, all_to_all) against nccl-tests (MPI), on a
# lent 2-GPU machine in one call (device tool, carry .fetched; about 3 minutes). Per-op fixed cost
# or bandwidth? nccl-tests (mpiexec -n 2, -N 10 cycles) and our comm job (events and graph timing,
# 10 trials), each with NCCL's default graph mixing and with NCCL_GRAPH_MIXING_SUPPORT=0, at
# 32 MiB, 64 MiB and 128 MiB for six ops.
#   bash benchmarks/runs/busbw_dips_run.sh        -> $OUT/dips.tgz (nt/*.txt, ours/*.csv)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/dips; rm -rf "$W"; mkdir -p "$W"/{nt,ours}
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
TR=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"; } | tee "$W/env.txt"
stamp build
NCCL_TESTS_OPS="all_reduce all_gather reduce_scatter broadcast alltoall sendrecv" BUILD_DIR=/tmp/nt-build timeout 200 \
  bash tools/nccl_tests_build.sh > "$W/build.log" 2>&1 || { echo "build FAILED"; tail -n 20 "$W/build.log"; }
ND=/tmp/nt-build/bin; MPIEXEC=$(sed -n 's/^MPIEXEC=//p' "$W/build.log" | tail -n1)
NT_LD=$(. /tmp/nt-build/env.sh 2>/dev/null && echo "$LD_LIBRARY_PATH")
for mix in default 0; do
  if [ $mix = default ]; then unset NCCL_GRAPH_MIXING_SUPPORT; sfx=""; else export NCCL_GRAPH_MIXING_SUPPORT=0; sfx="_mix0"; fi
  stamp "NCCL_GRAPH_MIXING_SUPPORT=$mix"
  for pair in all_reduce:all_reduce_perf all_gather:all_gather_perf reduce_scatter:reduce_scatter_perf \
              broadcast:broadcast_perf all_to_all:alltoall_perf send_recv:sendrecv_perf; do
    [ -x "$ND/${pair#*:}" ] || continue
    LD_LIBRARY_PATH=$NT_LD timeout 60 "$MPIEXEC" -n 2 "$ND/${pair#*:}" -b 32M -e 128M -f 2 -n 20 -w 5 -N 10 \
      > "$W/nt/mpi2_${pair%%:*}_large$sfx.txt" 2>&1 || echo "  nccl-tests ${pair#*:} rc=$?"
  done
  timeout 200 "${TR[@]}" -m distbench.comm --backend nccl --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv \
    --sizes 32MiB,64MiB,128MiB --timing events,graph --graph-launches 1 --iters 20 --warmup 5 --trials 10 --rank-agg avg \
    --out "$W/ours/large$sfx.csv" > "$W/ours/large$sfx.log" 2>&1; echo "  ours rc=$?"
done
stamp done
tar czf /tmp/dips.tgz -C "$W" . && mv /tmp/dips.tgz "$OUT/"
