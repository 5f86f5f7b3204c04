#!/usr/bin/env bash
# Small-message all_reduce latency: our CUDA-graph timing variants next to nccl-tests, on one lent
# 2-GPU machine, in one call (about 2-3 minutes; every step has a timeout, worst case ~6 min):
#
#   bash benchmarks/runs/latency_run.sh          # device tool: carry=[".fetched"] (nccl-tests source)
#
# 1. builds nccl-tests' all_reduce_perf against torch's libnccl (tools/nccl_tests_build.sh),
#    going on without it if that fails;
# 2. runs benchmarks/investigations/graph-latency/graph_latency.py on 2 ranks -> $OUT/graph_latency.csv (+ .log);
# 3. runs all_reduce_perf 8 B..1 MiB with -G 10 (graph) and -G 0 (plain) -> $OUT/nccl_tests_G10.txt,
#    $OUT/nccl_tests_G0.txt;
# 4. prints our baseline / best variant next to nccl-tests' out-of-place time at each size.
#
# Superseded by nccl_layouts_run.sh and graph_mixing_run.sh, which build nccl-tests with MPI
# from PyPI's mpich wheel and compare in our own layout (mpiexec -n 2). Kept to rerun the earlier
# one-process comparison: it forces NCCL_TESTS_MPI=0 below.
# nccl-tests is built with MPI=0 here, so ONE process drives both GPUs:
# `-g 2` (one thread, both GPUs, launches grouped with ncclGroupStart/End). That is not how torchrun
# runs (one process per GPU), and nccl-tests' multi-GPU-per-process mode is known to slow small
# messages (the issue notes it): it is the comparison we can make without MPI. `-t 2 -g 1` (two
# threads of one process, one GPU each, own stream each) is closer to one-rank-per-GPU, so it runs
# too: $OUT/nccl_tests_t2_G10.txt and $OUT/nccl_tests_t2_G0.txt.
set -uo pipefail
# NVLink multicast must stay off on these machines (device README): NCCL, PyTorch, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

stamp "machine"
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'gpus', torch.cuda.device_count())" 2>&1
  nvcc --version 2>&1 | grep -i release
} | tee "$OUT/env.txt"

# --- 1. nccl-tests --------------------------------------------------------------------------------
stamp "building nccl-tests (log: $OUT/nccl_tests_build.log)"
BIN=""
if NCCL_TESTS_MPI=0 timeout 150 bash tools/nccl_tests_build.sh > "$OUT/nccl_tests_build.log" 2>&1; then
  BIN=$(sed -n 's/^NCCL_TESTS_BIN=//p' "$OUT/nccl_tests_build.log" | tail -n1)
  grep '^nccl_tests_build:' "$OUT/nccl_tests_build.log"
  # LD_LIBRARY_PATH with torch's libnccl first, for the nccl-tests runs only (torch keeps its own).
  # shellcheck disable=SC1091
  NT_LD=$(. "$(dirname "$(dirname "$BIN")")/env.sh" && echo "$LD_LIBRARY_PATH")
else
  rc=$?
  echo "nccl-tests build FAILED (rc=$rc$([ $rc = 124 ] && echo ', timed out')); continuing without it. Last lines:"
  tail -n 25 "$OUT/nccl_tests_build.log"
fi

# --- 2. our variants ------------------------------------------------------------------------------
stamp "graph_latency.py on 2 ranks"
timeout 120 python3 -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/graph_latency.py \
  --out "$OUT/graph_latency.csv" > "$OUT/graph_latency.log" 2>&1
rc=$?
if [ $rc = 0 ]; then  # the tables come with the comparison below; show only the notable lines here
  grep -E '^graph_latency: (torch|measured|PROBLEM)|WARNING|FAILED|skipped' "$OUT/graph_latency.log"
else
  tail -n 40 "$OUT/graph_latency.log"
fi
echo "graph_latency rc=$rc$([ $rc = 124 ] && echo ' (timed out)') (all lines: $OUT/graph_latency.log)"

# --- 3. nccl-tests runs ---------------------------------------------------------------------------
refs=()
if [ -n "$BIN" ] && [ -x "$BIN" ]; then
  for mode in "G10:-g 2 -G 10" "G0:-g 2 -G 0" "t2_G10:-t 2 -g 1 -G 10" "t2_G0:-t 2 -g 1 -G 0"; do
    name=${mode%%:*}; flags=${mode#*:}
    stamp "all_reduce_perf -b 8 -e 1M -f 2 -n 20 -w 5 $flags -> $OUT/nccl_tests_$name.txt"
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$NT_LD NCCL_DEBUG=VERSION timeout 30 "$BIN" -b 8 -e 1M -f 2 -n 20 -w 5 $flags > "$OUT/nccl_tests_$name.txt" 2>&1
    rc=$?
    [ $rc = 0 ] || { echo "  rc=$rc$([ $rc = 124 ] && echo ' (timed out)')"; grep -iE 'fail|error|invalid' "$OUT/nccl_tests_$name.txt" | head -n 3 | sed 's/^/  /'; }
    grep -E '^# nccl-tests version|NCCL version|^# nThread|^ +(8|1024|65536|1048576) ' "$OUT/nccl_tests_$name.txt" | sed 's/^/  /'
    refs+=(--nccl-tests "$name=$OUT/nccl_tests_$name.txt")
  done
else
  echo "no nccl-tests binary: comparison below has our numbers only"
fi

# --- 4. comparison ------------------------------------------------------------------------------
stamp "comparison"
if [ -s "$OUT/graph_latency.csv" ]; then
  python3 benchmarks/investigations/graph-latency/graph_latency.py --compare "$OUT/graph_latency.csv" "${refs[@]}" 2>&1 | tee "$OUT/comparison.txt"
else
  echo "no $OUT/graph_latency.csv: graph_latency.py failed (see $OUT/graph_latency.log)"
  tail -n 30 "$OUT/graph_latency.log" 2>/dev/null
fi
stamp "done"
