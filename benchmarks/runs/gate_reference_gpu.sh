#!/usr/bin/env bash
# On a lent 2- or 4-GPU machine (device tool, carry .whl .fetched): the reference figures the gate
# judges a node with no baseline against, measured with nccl-tests itself (2.19.6, MPI build from PyPI's
# mpich wheel, one process per GPU: `mpiexec -n N`, like torchrun) on 2 and 4 GPUs of the same board:
#   all_reduce, all_gather, reduce_scatter at 1 GiB (float, events timing: nccl-tests' default), and
#   all_reduce at 8 B under CUDA graphs (-G 10) with NCCL_GRAPH_MIXING_SUPPORT=0 (the gate's settings),
# three launches each (-w 10 warm-up iterations, -n 50 / -n 2000 timed), NVLS off (device_setup.sh).
# Results under $OUT: reference.txt (every launch's out-of-place line), summary.txt, build.log.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
S=$OUT/summary.txt
{ echo "# card"; cat "$OUT/gpus.txt"; echo "# versions"; cat "$OUT/versions.txt"; cat .fetched/nccl-tests/VERSION.txt
  echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; date -u; } > "$S"
NCCL_TESTS_OPS="all_reduce all_gather reduce_scatter" MAKE_JOBS=16 bash tools/nccl_tests_build.sh > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
BIN=$(sed -n 's/^NCCL_TESTS_BIN=//p' "$OUT/build.log"); BIN=$(dirname "$BIN")
source /tmp/nccl-tests-build/env.sh
R=$OUT/reference.txt; : > "$R"
run() {  # ranks, visible, op, label, args...
  local n=$1 vis=$2 op=$3 label=$4; shift 4
  for i in 1 2 3; do
    out=$(CUDA_VISIBLE_DEVICES=$vis timeout 120 "$MPIEXEC" -n "$n" "$BIN/${op}_perf" "$@" 2>&1)
    line=$(grep -E '^ +[0-9]+ +[0-9]+ ' <<<"$out" | tail -1)
    echo "$n $op $label launch$i: $line" >> "$R"
    [ -n "$line" ] || echo "$out" | tail -5 >> "$R"
  done
}
N=$(nvidia-smi -L | grep -c '^GPU ')
for pair in "2 0,1" "4 0,1,2,3"; do
  set -- $pair
  [ "$1" -le "$N" ] || continue  # a count this machine has
  for op in all_reduce all_gather reduce_scatter; do run "$1" "$2" "$op" 1GiB -b 1G -e 1G -w 10 -n 50; done
  NCCL_GRAPH_MIXING_SUPPORT=0 run "$1" "$2" all_reduce 8B_graph -b 8 -e 8 -w 100 -n 2000 -G 10
done
echo "# columns after the colon: size count type redop root | out-of-place time_us algbw busbw #wrong | in-place ..." >> "$S"
cat "$R" >> "$S"
cat "$S"
