#!/usr/bin/env bash
# The control for the gate's baseline rule, on a lent 2-GPU machine (device tool, carry .whl):
# how far apart healthy launches of the gate are on one machine, against the spread of one launch's
# trials (the baseline's noise), and the rule on real readings:
#   1. four gate launches, back to back (--out /tmp/gate-1..4): each one's busbw at 1 GiB and 8 B latency;
#   2. launch 4 judged against launches 1-3 (three runs: run-to-run noise measured, may fail) and
#      against launch 1 alone (one run: a regression only warns);
#   3. `snakemake --cores 1 gate` with gate_baseline set to launches 1-3 (the workflow's path).
# Results under $OUT: noise.txt (the table and every line), gate_*.csv.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
S=$OUT/noise.txt
{ echo "# card"; cat "$OUT/gpus.txt"; echo "# versions"; cat "$OUT/versions.txt"
  echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE (device_setup.sh)"; } > "$S"
gate() {  # name, args...
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  python3 -m distbench.gate "$@" > "/tmp/$name.out" 2>&1; local rc=$?
  echo "## $name: python -m distbench.gate $* -> exit $rc, $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s" >> "$S"
  grep "^distbench gate:" "/tmp/$name.out" >> "$S" || tail -5 "/tmp/$name.out" >> "$S"
}
for i in 1 2 3 4; do gate "launch_$i" --out "/tmp/gate-$i" --budget-s 60; done
python3 - >> "$S" <<'PY'
from statistics import median
from distbench.gate.points import points_from_csv
from distbench.gate.rules import spread
rows = []
for i in (1, 2, 3, 4):
    pts = {(p.size_bytes, p.timing): p for p in points_from_csv(f"/tmp/gate-{i}/gate_comm.csv")}
    big = max(pts.values(), key=lambda p: p.size_bytes)
    lat = min(pts.values(), key=lambda p: p.size_bytes)
    rows.append((i, median(big.busbw_gbps), spread(big.busbw_gbps), median(lat.time_us), spread(lat.time_us)))
print("## per launch: busbw_gbps at the largest size (median, trials' spread); latency_us at 8 B (median, spread)")
for i, bw, sbw, lat, slat in rows:
    print(f"launch {i}: {bw:.1f} GB/s ±{sbw:.2%}   {lat:.2f} us ±{slat:.2%}")
bws, lats = [r[1] for r in rows], [r[3] for r in rows]
print(f"run to run: busbw {min(bws):.1f}-{max(bws):.1f} GB/s ({spread(bws):.2%} from their median); "
      f"latency {min(lats):.2f}-{max(lats):.2f} us ({spread(lats):.2%})")
PY
gate judged_against_three --out /tmp/gate-j3 --budget-s 60 --baseline /tmp/gate-1 --baseline /tmp/gate-2 --baseline /tmp/gate-3
gate judged_against_one --out /tmp/gate-j1 --budget-s 60 --baseline /tmp/gate-1
{ echo "## baseline checks of launch 4's judgement against three runs"; grep ',baseline,' /tmp/gate-j3/gate.csv
  echo "## ... and against one run"; grep ',baseline,' /tmp/gate-j1/gate.csv; } >> "$S"
{ echo "## snakemake --cores 1 gate --config 'gate_baseline=[/tmp/gate-1,/tmp/gate-2,/tmp/gate-3]'"; t0=$(date +%s.%N)
  timeout 200 python3 -m snakemake --cores 1 gate --config 'gate_baseline=[/tmp/gate-1,/tmp/gate-2,/tmp/gate-3]' > /tmp/smk.log 2>&1; rc=$?
  echo "exit $rc, $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s"; grep "^distbench gate:" /tmp/smk.log || tail -20 /tmp/smk.log
  grep ',baseline,' "$R/health/gate.csv" 2>&1; } >> "$S"
cp /tmp/gate-j3/gate.csv "$OUT/gate_judged_against_three.csv"; cp /tmp/gate-j1/gate.csv "$OUT/gate_judged_against_one.csv"
rm -f "$OUT/topo.txt"
cat "$S"
