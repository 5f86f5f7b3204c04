#!/usr/bin/env bash
# The GPU-pair matrix on a lent 4-GPU machine (device tool, carry .whl): the pipeline's `comm` target and
# report with benchmarks/runs/configs/comm-pairs-4gpu.yaml (the GPU-pair matrix and the arrival record),
# then the same job with one rank made slow on purpose (DISTBENCH_TEST_SLOW_RANK, test-only) to see
# the straggler flagged on real GPUs. Tables, figures and the report land in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
export DISTBENCH_RUN_LABEL="${DISTBENCH_RUN_LABEL:-$(python3 -c 'from distbench.core.run_label import default_label; print(default_label())')}"
R="results/$DISTBENCH_RUN_LABEL"  # where the pipeline writes (results/<run label>/)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/slow" /tmp/slow
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
rm -rf results report .snakemake
t0=$(date +%s)
timeout 420 python3 -m snakemake report --cores 1 -k --configfile benchmarks/runs/configs/comm-pairs-4gpu.yaml > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 2 "$OUT/snakemake.log"
cp $R/tables/comm_pairs.csv $R/tables/comm_stragglers.csv $R/tables/comm_summary.csv \
  $R/probe/topology.json "$OUT/" 2>/dev/null
cp $R/comm/nccl/float32/ws4/default/pairs.csv "$OUT/pairs_raw.csv" 2>/dev/null
cp $R/figures_pairs/*.png report/report.md "$OUT/" 2>/dev/null
grep -h "GPU-pair\|Straggler" report/report.md | head -5
# one rank late by 2 ms at every trial: a straggler the report must name
DISTBENCH_TEST_SLOW_RANK=3:2 timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node=4 \
  -m distbench.comm --backend nccl --ops all_reduce --sizes 1MiB,64MiB --timing events --trials 12 --iters 20 \
  --out /tmp/slow/comm.csv > "$OUT/slow/job.log" 2>&1
echo "slow-rank job rc=$?"
cp /tmp/slow/comm.csv "$OUT/slow/comm.csv"
python3 - "$OUT/slow/comm.csv" <<PY
import sys
from distbench.comm.analysis.summary import stragglers
from distbench.comm.analysis.findings import straggler_findings
from distbench.core.contract import read_comm_csv
s = stragglers(read_comm_csv(sys.argv[1]))
print(s.to_string(index=False)); print("\n".join(straggler_findings(s)))
PY
# one archive (the device tool brings back a limited number of files)
# archived outside $OUT, so tar never reads the archive it is writing ("file changed as we read it")
tar czf /tmp/pairs-run.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/pairs-run.tgz "$OUT/"
