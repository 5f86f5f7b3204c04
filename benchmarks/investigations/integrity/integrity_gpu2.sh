#!/usr/bin/env bash
# Issue 8, second GPU call: (1) graph anatomy: c10d vs raw NCCL in the same kind of CUDA graph, and
# each graph's nodes; (2) buffer rotation on/off interleaved twice, so run-to-run noise can be told
# apart from a cache effect. Output: $OUT/integrity2.tgz and the printed tables.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1  # the repository root: every path below is relative to it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/integrity2; rm -rf "$W"; mkdir -p "$W/anatomy"
T0=$(date +%s); stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
stamp anatomy
timeout 180 python3 -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/graph_anatomy.py "$W/anatomy" \
  > "$W/anatomy.log" 2>&1 || echo "anatomy rc=$?"
grep -v "^\[W\|Warning\|warn" "$W/anatomy.log" | tail -n 30
H=(python3 -m torch.distributed.run --standalone --nproc_per_node=2 -m distbench.comm --backend nccl)
SWEEP=$(python3 -c "print(','.join(str(2**i) for i in range(3, 27)))")
for name in on_a off_a on_b off_b; do
  stamp "rotation $name"
  rot=256MiB; [[ $name == off* ]] && rot=0
  timeout 120 "${H[@]}" --ops all_reduce,all_gather --sizes "$SWEEP" --timing events,graph --trials 10 \
    --rotate-bytes $rot --out "$W/rot_$name.csv" > "$W/rot_$name.log" 2>&1 || echo "  rc=$?"
done
python3 - "$W" <<'PY'
import sys, pandas as pd
w = sys.argv[1]
k = ["op", "timing", "size_bytes"]
med = {n: pd.read_csv(f"{w}/rot_{n}.csv").query("status == 'ok'").groupby(k)["time_us"].median() for n in ("on_a", "off_a", "on_b", "off_b")}
r = pd.DataFrame({"on_a/on_b": med["on_a"] / med["on_b"], "off_a/off_b": med["off_a"] / med["off_b"],
                  "on/off (a)": med["on_a"] / med["off_a"], "on/off (b)": med["on_b"] / med["off_b"]}).reset_index()
r["band"] = pd.cut(r["size_bytes"], [0, 2**16, 2**20, 2**24, 2**27], labels=["<=64K", "64K-1M", "1M-16M", "16M-64M"])
print("median ratio per band (same-setting ratios show the run-to-run noise)")
print(r.groupby(["op", "timing", "band"], observed=True)[["on_a/on_b", "off_a/off_b", "on/off (a)", "on/off (b)"]].median().round(3).to_string())
PY
tar czf "$OUT/integrity2.tgz" -C /tmp integrity2
stamp done
