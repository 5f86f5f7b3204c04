#!/usr/bin/env bash
# Flight Recorder's cost, a hang and node pairs on a lent 2-GPU machine in one call (device tool,
# carry .whl; about 5 minutes):
#   1. Flight Recorder's cost: the comm and training jobs with it on and off, alternating
#      (benchmarks/runs/flight_recorder_cost.sh, ROUNDS rounds, cut at FR_LIMIT_S);
#   2. a hung NCCL comm job (one rank skips a collective: DISTBENCH_TEST_HANG_RANK=1:1, tests only):
#      what the CSV, comm.hang.json and the report say;
#   3. node-pair rounds with two single-GPU "nodes" on this host (nodes.simulate: 2), NCCL.
# Results: $OUT/flight_recorder_cost.txt, $OUT/fr_cost.tgz, $OUT/hang.txt, $OUT/nodes.txt, $OUT/runs.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
ROUNDS=${ROUNDS:-2} LIMIT_S=${FR_LIMIT_S:-110} OUT=$OUT bash benchmarks/runs/flight_recorder_cost.sh > /dev/null 2>&1
tar czf /tmp/fr_cost.tgz -C "$OUT" fr_cost 2>/dev/null && rm -rf "$OUT/fr_cost" && mv /tmp/fr_cost.tgz "$OUT/"
H=$OUT/hang.txt
DISTBENCH_TEST_HANG_RANK=1:1 DISTBENCH_RUN_LABEL=hang timeout 100 python3 -m snakemake --cores 1 --configfile benchmarks/runs/configs/nccl_hang.yaml > "$OUT/hang.log" 2>&1
echo "snakemake rc $?" >> "$H"
J=results/hang/comm/nccl/float32/ws2/default
{ cat "$J/comm.csv" | cut -c1-400; echo; cat "$J/comm.hang.json"; echo; grep -A12 -i "hung" report/report.md | head -40; } >> "$H" 2>&1
ps -eo pid,cmd | grep "distbench\.\(comm\|training\|memory\)" | grep -v grep >> "$H" || echo "no job process left" >> "$H"
N=$OUT/nodes.txt
{ /usr/bin/time -f "nodes: %e s wall (rc %x)" timeout 90 env DISTBENCH_RUN_LABEL=nodes python3 -m snakemake --cores 1 nodes --config 'nodes={enabled: true, simulate: 2}' > "$OUT/nodes.log" 2>&1; } 2>> "$N"
for t in nodes_pairs nodes_scores; do echo "== $t"; cat results/nodes/tables/$t.csv; done >> "$N" 2>&1
python3 - >> "$N" 2>&1 <<'PY'
import pandas as pd
d = pd.read_csv("results/nodes/tables/nodes.csv")
print(d.groupby(["op", "direction", "size_bytes"])[["time_us", "algbw_gbps", "busbw_gbps"]].median().to_string())
PY
cat "$OUT/flight_recorder_cost.txt" "$H" "$N" | tail -120
tar czf /tmp/runs.tgz results report .snakemake/log 2>/dev/null; mv /tmp/runs.tgz "$OUT/"
