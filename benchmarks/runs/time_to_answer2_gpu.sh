#!/usr/bin/env bash
# Time to an answer, the closing measurement on a lent 2-GPU machine (device tool, carry .whl; one call,
# ~8 min): the default run from a fresh checkout (default_run_gpu.sh: wall time, the estimate printed
# before it, every job's and every step's time), then the quick answer under a fresh run label
# (quick_gpu.sh). Results: $OUT/summary.txt and $OUT/all.tgz (both scripts' files).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
FINAL_OUT=${OUT:-/tmp/out}
export OUT=$FINAL_OUT/default; mkdir -p "$OUT"
FULL_LIMIT_S=${FULL_LIMIT_S:-420} bash benchmarks/runs/default_run_gpu.sh > "$FINAL_OUT/default_console.txt" 2>&1
rm -rf report/quick.md
export OUT=$FINAL_OUT/quick DISTBENCH_RUN_LABEL=quick; mkdir -p "$OUT"
timeout 200 bash benchmarks/runs/quick_gpu.sh > "$FINAL_OUT/quick_console.txt" 2>&1
{ cat "$FINAL_OUT/default/default_run.txt"; echo; cat "$FINAL_OUT/quick/quick_time.txt"; } > "$FINAL_OUT/summary.txt"
cd "$FINAL_OUT" && tar czf all.tgz default quick default_console.txt quick_console.txt && rm -rf default quick default_console.txt quick_console.txt
cat summary.txt
