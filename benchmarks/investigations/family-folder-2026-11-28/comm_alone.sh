#!/usr/bin/env bash
# The control for the comm points that moved between the old (5a8a229) and the new workflow in the
# same-machine default runs (NCCL send_recv at 8 and 16 MiB: 86-88 us old, 108-112 us new): the default
# NCCL comm job alone, old and new trees alternating, REPS times, on one lent 2-GPU machine (device
# tool; carry .whl and .old, the old tree as `git archive 5a8a229` in .old/old.tgz). Out: $OUT/comm_alone.csv
# (tree, rep, op, size, median time and busbw) for send_recv and all_reduce from 4 MiB to 64 MiB.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
NEW=$PWD
mkdir -p /tmp/old && tar xzf .old/old.tgz -C /tmp/old && cp -r .whl /tmp/old/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
JOB=results/ctl/comm/nccl/float32/ws2/default
echo "tree,rep,op,size_bytes,timing,time_us_median,busbw_gbps_median" > "$OUT/comm_alone.csv"
for rep in $(seq 1 "${REPS:-3}"); do
  for tree in old new; do
    dir=$NEW; [ $tree = old ] && dir=/tmp/old
    (cd "$dir" && export PYTHONPATH=/tmp/site:$dir DISTBENCH_RUN_LABEL=ctl && rm -rf $JOB \
      && timeout 240 python3 -m snakemake --cores 1 $JOB/comm.csv --config batch_launch=false > "$OUT/$tree-$rep.log" 2>&1
      python3 - "$tree" "$rep" $JOB/comm.csv >> "$OUT/comm_alone.csv" <<'PY'
import sys
import pandas as pd
tree, rep, path = sys.argv[1:4]
df = pd.read_csv(path)
df = df[(df["status"] == "ok") & df["op"].isin(["send_recv", "all_reduce"]) & ~df["inplace"]
        & df["size_bytes"].between(4 << 20, 64 << 20)]
for (op, size, timing), g in df.groupby(["op", "size_bytes", "timing"]):
    print(f"{tree},{rep},{op},{size},{timing},{g['time_us'].median():.2f},{g['busbw_gbps'].median():.2f}")
PY
    )
    tail -n 3 "$OUT/$tree-$rep.log" > "$OUT/$tree-$rep.tail"; rm -f "$OUT/$tree-$rep.log"
  done
done
python3 - "$OUT/comm_alone.csv" <<'PY'
import sys
import pandas as pd
t = pd.read_csv(sys.argv[1])
print(t[t["timing"] == "events"].pivot_table(index=["op", "size_bytes"], columns=["tree", "rep"], values="time_us_median").round(1).to_string())
PY
