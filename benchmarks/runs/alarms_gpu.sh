#!/usr/bin/env bash
# The report's alarms on a lent 2-GPU machine (device tool, carry .whl). Two parts, one device call each:
#   PART=default: the default run (`snakemake --cores 1`, fresh), its report's Verdict and health
#     section, and every health item that is not ok: a healthy run must raise no alarm.
#   PART=hang: rank 1 of a default NCCL comm job frozen by SIGSTOP mid-sweep (Flight Recorder off, the
#     comm family's default), the same for an NCCL training job (recorder on), and a 1-rank NCCL training
#     job given 100,000 steps and a 60 s limit (still progressing: timeout, not hung)
#     (benchmarks/runs/freeze_rank.py).
# Results under $OUT: default_run.txt, verdict.md, health_not_ok.csv, health_diff.csv, run.tgz; or
# hang_comm.txt, hang_training.txt, slow_training.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
if [ "${PART:-default}" = default ]; then
  rm -rf results report .snakemake
  T=$OUT/default_run.txt
  { /usr/bin/time -f "default run: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-520}" python3 -m snakemake --cores 1 > "$OUT/full.log" 2>&1; } 2>> "$T"
  grep -h "^distbench: .*planned\|^distbench: to run" "$OUT/full.log" | head -2 >> "$T"
  tail -n 3 "$OUT/full.log" >> "$T"
  python3 - "$R" "$OUT" <<'PY' >> "$T"
import sys
from pathlib import Path
import pandas as pd
r, out = Path(sys.argv[1]), Path(sys.argv[2])
report = Path("report/report.md").read_text() if Path("report/report.md").exists() else ""
(out / "verdict.md").write_text(report.split("\n## ", 2)[1] if "\n## " in report else "(no report)")
for name in ("health_before", "health_after", "health_diff"):
    p = r / "health" / f"{name}.csv"
    if p.exists():
        df = pd.read_csv(p)
        bad = df[df["state"].isin(["degraded", "failing"])]
        print(f"{name}: {len(df)} rows, {len(bad)} degraded or failing")
        bad.to_csv(out / f"{name}_not_ok.csv", index=False)
        if name == "health_diff":
            df.to_csv(out / "health_diff.csv", index=False)
print("report mentions 'degraded':", report.count("degraded"), "times; '†health':", report.count("†health"))
PY
  cat "$T"
  cp "$OUT"/topo.txt "$OUT"/versions.txt "$OUT"/gpus.txt "$OUT"/full.log "$OUT"/*_not_ok.csv report/ 2>/dev/null
  tar czf /tmp/run.tgz results report .snakemake/log 2>/dev/null; mv /tmp/run.tgz "$OUT/"
  rm -f "$OUT"/*_not_ok.csv "$OUT"/full.log
else
  python3 benchmarks/runs/freeze_rank.py comm nccl freeze /tmp/hang_comm 2>&1 | tee "$OUT/hang_comm.txt"
  python3 benchmarks/runs/freeze_rank.py training nccl freeze /tmp/hang_training 2>&1 | tee "$OUT/hang_training.txt"
  python3 benchmarks/runs/freeze_rank.py training nccl slow /tmp/slow_training 2>&1 | tee "$OUT/slow_training.txt"
  tar czf "$OUT/hang_runs.tgz" -C /tmp hang_comm hang_training slow_training
fi
