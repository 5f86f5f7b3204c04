#!/usr/bin/env bash
# Shared launches on a lent 2-GPU machine (device tool, carry .whl; one call, at most ~9.5 minutes):
#   1. the default run, `snakemake --cores 1` in a fresh checkout, timed (cut at FULL_LIMIT_S, 330 s),
#      with its jobs' times (jobs.csv) and the estimate printed before the first job;
#   2. the same training jobs of gpt and lora and memory's gpt DDP job at 2 ranks, each launched
#      alone (batch_launch: false, run label `alone`), cut at ALONE_LIMIT_S (200 s);
#   3. their figures side by side with the default run's (measured in shared launches).
# Results: $OUT/default_run.txt, $OUT/jobs.csv, $OUT/same_figures.txt, $OUT/run.tgz
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
rm -rf results report .snakemake
T=$OUT/default_run.txt
{ /usr/bin/time -f "default run: %e s wall (rc %x)" timeout "${FULL_LIMIT_S:-330}" python3 -m snakemake --cores 1 > "$OUT/full.log" 2>&1; } 2>> "$T"
grep -h "^distbench: .*planned\|^distbench: to run" "$OUT/full.log" | head -2 >> "$T"
tail -n 3 "$OUT/full.log" >> "$T"
python3 -m snakemake -n --cores 1 2>&1 | grep "^distbench:" >> "$T"
python3 benchmarks/runs/jobs_table.py "$R" > "$OUT/jobs.csv"
cat "$T"
ALONE=results/alone
targets=$(for m in gpt lora; do for p in $R/training/nccl/$m/ws*/*/training.csv; do echo "${p/$R/$ALONE}"; done; done)
targets="$targets $ALONE/memory/nccl/gpt/ws2/ddp/memory.csv"
{ /usr/bin/time -f "alone: %e s wall (rc %x)" timeout "${ALONE_LIMIT_S:-200}" env DISTBENCH_RUN_LABEL=alone python3 -m snakemake --cores 1 --config batch_launch=false -- $targets > "$OUT/alone.log" 2>&1; } 2>> "$T"
python3 - "$R" "$ALONE" > "$OUT/same_figures.txt" <<'PY'
import glob, sys
import pandas as pd
shared, alone = sys.argv[1:3]
print("training: median step_time_ms per phase, shared launch vs alone (same machine, same call)")
for p in sorted(glob.glob(f"{alone}/training/nccl/*/ws*/*/training.csv")):
    rel = p[len(alone) + 1:]
    a, s = pd.read_csv(p), pd.read_csv(f"{shared}/{rel}")
    for phase in ("step", "compute_only", "comm_alone"):
        ma, ms = a[a.phase == phase].step_time_ms.median(), s[s.phase == phase].step_time_ms.median()
        print(f"{rel.rsplit('/', 1)[0]:40s} {phase:13s} shared {ms:9.3f}  alone {ma:9.3f}  shared/alone {ms / ma:.3f}")
print("memory: peak allocated bytes per batch and the largest batch, shared launch vs alone")
for p in sorted(glob.glob(f"{alone}/memory/nccl/*/ws*/*/memory.csv")):
    rel = p[len(alone) + 1:]
    a, s = pd.read_csv(p), pd.read_csv(f"{shared}/{rel}")
    for b in sorted(set(a[a.phase == "measure"].batch_size)):
        pa = a[(a.phase == "measure") & (a.batch_size == b)].peak_allocated_bytes.iloc[0]
        ps = s[(s.phase == "measure") & (s.batch_size == b)].peak_allocated_bytes.iloc[0]
        print(f"{rel.rsplit('/', 1)[0]:40s} batch {b:5d} shared {ps:14.0f}  alone {pa:14.0f}  diff {ps - pa:+.0f} B")
    la = a[(a.phase == "search") & (a.status == "ok")].batch_size.max()
    ls = s[(s.phase == "search") & (s.status == "ok")].batch_size.max()
    print(f"{rel.rsplit('/', 1)[0]:40s} largest batch that fits: shared {ls}  alone {la}")
PY
cat "$OUT/same_figures.txt"; tail -n 2 "$T"
tar czf /tmp/run.tgz results report .snakemake/log 2>/dev/null; mv /tmp/run.tgz "$OUT/"
