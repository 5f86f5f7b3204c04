#!/usr/bin/env bash
# On a lent 2-GPU machine (device tool, carry .whl; one call, ~7.5 min):
#   1. the default run from a fresh checkout, timed (default_run_gpu.sh, cut at FULL_LIMIT_S): the
#      training family's timed steps now run with Python's garbage collector paused (training/wrap.py
#      gc_paused), and the memory search starts at the predicted limit;
#   2. the control for the first: the FSDP training configurations (gpt, lora at 1 and 2 ranks, in
#      shared launches of two) with the collector running during the timed steps
#      (DISTBENCH_TIMED_GC=on), then paused, each under a fresh run label.
# FSDP steps had a p5-p95 of 25-30% of the step (../results/time-to-answer-h200x2-2026-11-27b/control):
# if collections inside timed steps cause it, the paused rounds are tighter.
# Results: $OUT/gc.txt, $OUT/gc.csv, $OUT/default.tgz (default_run_gpu.sh's files)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
FINAL_OUT=${OUT:-/tmp/out}
export OUT=$FINAL_OUT/default; mkdir -p "$OUT"
FULL_LIMIT_S=${FULL_LIMIT_S:-330} bash benchmarks/runs/default_run_gpu.sh > "$FINAL_OUT/default_console.txt" 2>&1
export OUT=$FINAL_OUT
T=$OUT/gc.txt
cat "$OUT/default/default_run.txt" > "$T"
FSDP="gpt/ws1/fsdp lora/ws1/fsdp gpt/ws2/fsdp lora/ws2/fsdp"
round() {  # label DISTBENCH_TIMED_GC
  local label=$1 gc=$2
  local targets=$(for c in $FSDP; do echo "results/$label/training/nccl/$c/training.csv"; done)
  { /usr/bin/time -f "$label (DISTBENCH_TIMED_GC=$gc): %e s wall (rc %x)" timeout 90 env DISTBENCH_RUN_LABEL=$label \
      DISTBENCH_TIMED_GC=$gc python3 -m snakemake --cores 1 -- $targets > "$OUT/$label.log" 2>&1; } 2>> "$T"
}
round gc_on on
round gc_paused off
python3 - "$OUT/gc.csv" $FSDP >> "$T" <<'PY'
import sys
import pandas as pd
out, configs = sys.argv[1], sys.argv[2:]
rows = []
for label in ("gc_on", "gc_paused"):
    for c in configs:
        try:
            d = pd.read_csv(f"results/{label}/training/nccl/{c}/training.csv")
        except OSError:
            continue
        for phase, g in d[d.status == "ok"].groupby("phase"):
            t = g.step_time_ms
            rows.append({"round": label, "config": c, "phase": phase, "median_ms": t.median(), "p5_ms": t.quantile(0.05),
                         "p95_ms": t.quantile(0.95), "max_ms": t.max(), "spread_pct": 100 * (t.quantile(0.95) - t.quantile(0.05)) / t.median(),
                         "n": len(t)})
df = pd.DataFrame(rows)
df.to_csv(out, index=False)
pd.set_option("display.width", 250)
print("FSDP training, median and p5-p95 spread (% of the median) per phase: collector running vs paused over the timed steps")
print(df.round(2).to_string(index=False))
PY
cat "$T"
cd "$OUT" && tar czf default.tgz default default_console.txt gc_on.log gc_paused.log && rm -rf default default_console.txt gc_on.log gc_paused.log
