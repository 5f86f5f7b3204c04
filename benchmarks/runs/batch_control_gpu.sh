#!/usr/bin/env bash
# The shared launch's control on a lent 2-GPU machine (device tool, carry .whl; one call, ~7.5 min): do the
# training figures move when a configuration runs in a shared launch (distbench.launch.batch) rather
# than alone? The last comparison (one run each, ../results/batch-launch-h200x2-2026-11-27) found FSDP steps
# -14%..+6% and the 1-rank comm_alone at 0.58x, and could not tell a launch effect from run-to-run
# spread. Here, alternating on one machine: shared, alone, shared, alone (ABAB), each round a fresh run
# label, so every round measures afresh:
#   shared: every training configuration of the default GPU plan (10, in two launches: 1 and 2 ranks,
#           the order and companions of the default run);
#   alone:  the five configurations that moved (gpt, lora 1-rank plain: comm_alone; lora 1-rank fsdp;
#           gpt, lora 2-rank fsdp), each launched by itself (batch_launch: false).
# A launch effect shows as shared/alone ratios beyond the shared/shared and alone/alone ones.
# Results: $OUT/control.txt (the table), $OUT/control.csv (every round's medians), $OUT/rounds.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
T=$OUT/control.txt
ALL="gpt/ws1/plain gpt/ws1/fsdp lora/ws1/plain lora/ws1/fsdp mlp/ws1/plain gpt/ws2/plain gpt/ws2/fsdp lora/ws2/plain lora/ws2/fsdp mlp/ws2/plain"
MOVED="gpt/ws1/plain lora/ws1/plain lora/ws1/fsdp gpt/ws2/fsdp lora/ws2/fsdp"
round() {  # label batch_launch configs...
  local label=$1 batch=$2; shift 2
  local targets=$(for c in "$@"; do echo "results/$label/training/nccl/$c/training.csv"; done)
  { /usr/bin/time -f "$label (batch_launch=$batch): %e s wall (rc %x)" timeout 200 env DISTBENCH_RUN_LABEL=$label \
      python3 -m snakemake --cores 1 --config batch_launch=$batch -- $targets > "$OUT/$label.log" 2>&1; } 2>> "$T"
}
round shared1 true $ALL
round alone1 false $MOVED
round shared2 true $ALL
round alone2 false $MOVED
python3 - "$OUT/control.csv" $MOVED >> "$T" <<'PY'
import sys
import pandas as pd
out, moved = sys.argv[1], sys.argv[2:]
rows = []
for label in ("shared1", "alone1", "shared2", "alone2"):
    for c in moved:
        try:
            d = pd.read_csv(f"results/{label}/training/nccl/{c}/training.csv")
        except OSError:
            continue
        for phase, g in d[d.status == "ok"].groupby("phase"):
            t = g.step_time_ms
            rows.append({"round": label, "config": c, "phase": phase, "median_ms": t.median(),
                         "p5_ms": t.quantile(0.05), "p95_ms": t.quantile(0.95), "n": len(t)})
df = pd.DataFrame(rows)
df.to_csv(out, index=False)
m = df.pivot_table(index=["config", "phase"], columns="round", values="median_ms")
for a, b in (("shared1", "alone1"), ("shared2", "alone2"), ("shared1", "shared2"), ("alone1", "alone2")):
    if a in m and b in m:
        m[f"{a}/{b}"] = (m[a] / m[b]).round(3)
pd.set_option("display.width", 250)
print("median step_time_ms per round; ratios: shared/alone (launch effect) beside shared/shared and alone/alone (spread)")
print(m.round(2).to_string())
PY
cat "$T"
tar czf /tmp/rounds.tgz results .snakemake/log 2>/dev/null; mv /tmp/rounds.tgz "$OUT/"
