"""Jobs run by gpt_fsdp.sh and lora.sh (each unpacked in a directory: DIR/<job>/), made here on CPU: each
job's summary (aggregate_training) and its split rank by rank, each rank's NCCL waits counted as
communication and as idle (peer_waits), with the rank job_trace_split chooses (the one that waited least).
  python benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27/analyze_split.py /tmp/gptf gpt_fsdp
  python benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27/analyze_split.py /tmp/lorag/lora lora_ddp lora_fsdp"""
import sys
from pathlib import Path

import pandas as pd

from distbench.traces.overlap import load_trace
from distbench.traces.split import job_trace_split, peer_waits, rank_split
from distbench.training.analysis.instep_summary import four_part_split
from distbench.training.analysis.summary import aggregate_training

here, src = Path(__file__).parent, Path(sys.argv[1])
for job in sys.argv[2:]:
    d = src / job
    aggregate_training([d / "training.csv"], src / f"training_raw_{job}.csv", here / f"training_summary_{job}.csv")
    s = pd.read_csv(here / f"training_summary_{job}.csv").iloc[0]
    traces = [load_trace(d / f"inspect/step/trace_rank{r}.json.gz") for r in (0, 1)]
    waits = peer_waits(traces)
    chosen = job_trace_split(d / "inspect")["rank"]
    rows = []
    for r in (0, 1):
        for counted in ("comm", "idle"):
            t = rank_split(traces[r], d / f"inspect/compute_only/trace_rank{r}.json.gz",
                           waits[r] if counted == "idle" else None)
            p = four_part_split(s.step_time_ms_median, s.compute_only_ms_median, t, s.bounds_allowance_ms)
            rows.append({"job": job, "rank": r, "waits_counted_as": counted, "chosen": r == chosen and counted == "idle",
                         "peer_wait_ms": sum(waits[r]) / 1e3 / t["n_traced_steps"], "step_ms": s.step_time_ms_median,
                         "step_trace_ms": t["step_trace_ms"], "compute_only_trace_ms": t["compute_only_trace_ms"],
                         "trace_idle_ms": t["idle"], **p})
    out = pd.DataFrame(rows)
    out.round(3).to_csv(here / f"split_{job}_by_rank.csv", index=False)
    print(out.round(2).T.to_string())
