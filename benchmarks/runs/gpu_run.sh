#!/usr/bin/env bash
# The proof run on a lent 2-GPU machine (device tool). Usage: benchmarks/runs/gpu_run.sh default|fidelity
#   default : the README's main job (`snakemake --cores 1`) timed, its no-op rerun timed, and the
#             launch-overhead experiment;
#   fidelity: benchmarks/runs/configs/h2-fidelity.yaml through the same workflow.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
export DISTBENCH_RUN_LABEL="${DISTBENCH_RUN_LABEL:-$(python3 -c 'from distbench.core.run_label import default_label; print(default_label())')}"
R="results/$DISTBENCH_RUN_LABEL"  # where the pipeline writes (results/<run label>/)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
now() { date +%s.%N; }
case "${1:-default}" in
default)
  rm -rf results report/report.md report/report.html report/figures .snakemake
  t0=$(now); python3 -m snakemake --cores 1 -k > "$OUT/snakemake-default.log" 2>&1; rc=$?; t1=$(now)
  python3 -m snakemake --cores 1 > "$OUT/snakemake-noop.log" 2>&1; t2=$(now)
  echo "default run rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))") noop_s=$(python3 -c "print(round($t2 - $t1, 2))")" | tee "$OUT/timing.txt"
  grep -h "distbench: exit" $R/logs/comm/*/*/*/*.log | sed 's/^/comm job: /' | tee -a "$OUT/timing.txt"
  for f in $R/logs/comm/*/*/*/*.log; do echo "$f: $(tail -n1 "$f")"; done >> "$OUT/timing.txt"
  for v in default TRACE0 TRACE0_NORS; do
    case $v in default) e=();; TRACE0) e=(TORCH_NCCL_TRACE_BUFFER_SIZE=0);; TRACE0_NORS) e=(TORCH_NCCL_TRACE_BUFFER_SIZE=0 TORCH_NCCL_AVOID_RECORD_STREAMS=1);; esac
    env "${e[@]}" VARIANT=$v python3 -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/investigations/launch-overhead/launch_overhead.py \
      2>/dev/null | { [ $v = default ] && cat || tail -n +2; } >> "$OUT/launch_overhead.csv"
  done
  tar czf "$OUT/results-default.tgz" results report/report.md report/report.html report/figures
  ;;
fidelity)
  rm -rf /tmp/fid && mkdir /tmp/fid && cp -r Snakefile config.yaml rules workflow benchmarks /tmp/fid/ && cd /tmp/fid
  t0=$(now); python3 -m snakemake --cores 1 -k --configfile benchmarks/runs/configs/h2-fidelity.yaml > "$OUT/snakemake-fidelity.log" 2>&1; rc=$?; t1=$(now)
  echo "fidelity run rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))")" | tee "$OUT/timing-fidelity.txt"
  for f in $R/logs/comm/*/*/*/*.log; do echo "$f: $(tail -n1 "$f")"; done >> "$OUT/timing-fidelity.txt"
  tar czf "$OUT/results-fidelity.tgz" results report/report.md report/report.html
  ;;
esac
tail -n 3 "$OUT"/snakemake-*.log
