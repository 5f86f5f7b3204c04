#!/usr/bin/env bash
# Profiler traces on a lent 4-GPU machine (device tool, carry .whl): the pipeline's `report` target with
# benchmarks/runs/configs/profile-4gpu.yaml (profile: true), then the NCCL kernel names one trace holds.
# Tables, the report and one trace come back in one archive under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: every path below is relative to it
source benchmarks/runs/device_setup.sh
echo "nsys: $(command -v nsys || echo 'not installed')" | tee -a "$OUT/versions.txt"
rm -rf results report .snakemake
t0=$(date +%s)
timeout ${PROFILE_TIMEOUT:-520} python3 -m snakemake report --cores 1 -k --configfile benchmarks/runs/configs/profile-4gpu.yaml \
  > "$OUT/snakemake.log" 2>&1
echo "pipeline rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 2 "$OUT/snakemake.log"
mkdir -p "$OUT/tables" "$OUT/traces"
cp $R/tables/trace_overlap.csv $R/tables/training_summary.csv $R/tables/comm_summary.csv "$OUT/tables/"
cp report/report.md "$OUT/"
cp $R/training/nccl/gpt/ws4/plain/trace/trace_rank0.json.gz "$OUT/traces/gpt_ws4_rank0.json.gz" 2>/dev/null
cp $R/training/nccl/mlp/ws4/plain/trace/trace_rank0.json.gz "$OUT/traces/mlp_ws4_rank0.json.gz" 2>/dev/null
sed -n '/^## Traces/,/^## Measurements/p' report/report.md
python3 - <<PY
import collections, glob
from distbench.traces.overlap import is_nccl_kernel, load_trace
for path in sorted(glob.glob("$R/training/nccl/*/ws4/plain/trace/trace_rank0.json.gz")):
    names = collections.Counter(e["name"] for e in load_trace(path) if e.get("cat") == "kernel")
    nccl = {n: c for n, c in names.items() if is_nccl_kernel(n)}
    print(path, "kernels:", sum(names.values()), "NCCL:", nccl)
PY
# archived outside $OUT, so tar never reads the archive it is writing ("file changed as we read it")
tar czf /tmp/profile-run.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/profile-run.tgz "$OUT/"
