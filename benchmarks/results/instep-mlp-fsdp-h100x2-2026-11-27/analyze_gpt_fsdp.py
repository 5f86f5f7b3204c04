"""The GPT 1.3b FSDP job of gpt_fsdp.sh (unpacked in a directory, argv[1]), made here on CPU: its summary
(aggregate_training) and its split rank by rank, each rank's NCCL waits counted as idle (peer_waits),
with the rank job_trace_split chooses (the one that waited least).
  python benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27/analyze_gpt_fsdp.py /tmp/gptf"""
import sys
from pathlib import Path

import pandas as pd

from distbench.traces.overlap import load_trace
from distbench.traces.split import four_part_split, job_trace_split, peer_waits, rank_split
from distbench.training.analysis.summary import aggregate_training

here, d = Path(__file__).parent, Path(sys.argv[1]) / "gpt_fsdp"
aggregate_training([d / "training.csv"], Path(sys.argv[1]) / "training_raw.csv", here / "training_summary_gpt_fsdp.csv")
s = pd.read_csv(here / "training_summary_gpt_fsdp.csv").iloc[0]
traces = [load_trace(d / f"inspect/step/trace_rank{r}.json.gz") for r in (0, 1)]
waits = peer_waits(traces)
chosen = job_trace_split(d / "inspect")["rank"]
rows = []
for r in (0, 1):
    for counted in ("comm", "idle"):
        t = rank_split(traces[r], d / f"inspect/compute_only/trace_rank{r}.json.gz", waits[r] if counted == "idle" else None)
        p = four_part_split(s.step_time_ms_median, s.compute_only_ms_median, t, s.bounds_allowance_ms)
        rows.append({"job": "gpt_fsdp", "rank": r, "waits_counted_as": counted, "chosen": r == chosen and counted == "idle",
                     "peer_wait_ms": sum(waits[r]) / 1e3 / t["n_traced_steps"], "step_ms": s.step_time_ms_median,
                     "step_trace_ms": t["step_trace_ms"], "compute_only_trace_ms": t["compute_only_trace_ms"],
                     "trace_idle_ms": t["idle"], **p})
out = pd.DataFrame(rows)
out.round(3).to_csv(here / "split_gpt_fsdp_by_rank.csv", index=False)
print(out.round(2).T.to_string())
