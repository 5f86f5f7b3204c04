#!/usr/bin/env bash
# Issue 8's GPU evidence in one call on a lent 2-GPU machine (device tool, carry=[".fetched"]):
#   1. benchmarks/runs/latency_run.sh: nccl-tests built against torch's NCCL, graph-latency variants;
#   2. the harness on NCCL: small all_reduce with 1 vs 10 graph launches per trial; buffer rotation
#      on vs off; every op 8 B - 1 GiB in float32 and bfloat16 (both checks, every rank's time);
#      an op that goes wrong after warm-up (tests/helpers/wrong_after_warmup.py) in events and graph;
#   3. benchmarks/investigations/integrity/integrity_summary.py prints the tables the benchmark note quotes.
# Everything lands in $OUT/integrity.tgz (+ the summary as text).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/integrity; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s); stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

OUT=$W/latency timeout 330 bash benchmarks/runs/latency_run.sh > "$W/latency_run.log" 2>&1
echo "latency_run rc=$?"; tail -n 30 "$W/latency_run.log"

H=(python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl)
SMALL=8,64,512,1KiB,8KiB,64KiB,256KiB,1MiB
SWEEP=$(python3 -c "print(','.join(str(2**i) for i in range(3, 31)))")
SWEEP64M=$(python3 -c "print(','.join(str(2**i) for i in range(3, 27)))")
h() { local name=$1; shift; stamp "$name"; timeout 240 "${H[@]}" "$@" --out "$W/$name.csv" > "$W/$name.log" 2>&1 || { echo "  rc=$?"; tail -n 5 "$W/$name.log"; }; }

h small_L1  --ops all_reduce --sizes $SMALL --timing events,graph --trials 10
h small_L10 --ops all_reduce --sizes $SMALL --timing graph --trials 10 --graph-launches 10
h rot_on    --ops all_reduce,all_gather --sizes $SWEEP64M --timing events,graph --trials 10
h rot_off   --ops all_reduce,all_gather --sizes $SWEEP64M --timing events,graph --trials 10 --rotate-bytes 0
h full_fp32 --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv,barrier --sizes $SWEEP --timing events,graph --inplace false,true
h full_bf16 --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv --sizes $SWEEP --timing events,graph --dtype bfloat16
stamp "wrong_after_warmup"
timeout 120 python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/helpers/wrong_after_warmup.py \
  --backend nccl --ops all_reduce --sizes 1KiB,64MiB --timing events,graph --out "$W/wrong.csv" > "$W/wrong.log" 2>&1 || echo "  rc=$?"

stamp "summary"
python3 benchmarks/investigations/integrity/integrity_summary.py "$W" | tee "$OUT/integrity_summary.txt"
tar czf "$OUT/integrity.tgz" -C /tmp integrity
stamp "done"
