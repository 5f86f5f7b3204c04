"""The tables of this folder, made on CPU from what run.sh returned (unpacked in a directory, argv[1]):
training.csv/training_summary.csv (aggregate_training), comm_summary.csv (the comm family's summarize),
training_instep.csv/training_split.csv (distbench.traces.instep_summary.instep_tables, the comm figures of
this same call, the matmul sweep of instep-h100x2-2026-11-27: the same machine type, an earlier call) and
hta_breakdown.csv (HTA 0.5.0's get_temporal_breakdown beside our states, on the real-step traces).
  python benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27/analyze.py /tmp/mlpfsdp"""
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.summary import summarize
from distbench.traces.instep_summary import instep_tables
from distbench.training.analysis.summary import aggregate_training

src, here = Path(sys.argv[1]), Path(__file__).parent
job = src / "mlp_fsdp"  # its inspect/ directory is committed as tests/fixtures/instep_h100x2_mlp_fsdp
aggregate_training([job / "training.csv"], here / "training.csv", here / "training_summary.csv")
comm = pd.concat([pd.read_csv(src / f"comm_{op}_float32.csv") for op in ("all_gather", "reduce_scatter")])
comm_summary = summarize(comm)
comm_summary.to_csv(here / "comm_summary.csv", index=False)
matmul = pd.read_csv(here.parent / "instep-h100x2-2026-11-27/matmul.csv")
summary = pd.read_csv(here / "training_summary.csv")
buckets, split = instep_tables({"mlp_fsdp": ({"model": "mlp", "world_size": 2, "strategy": "fsdp"}, job / "inspect")},
                               summary, comm_summary, matmul)
buckets.to_csv(here / "training_instep.csv", index=False)
split.to_csv(here / "training_split.csv", index=False)
for name in ("command.txt", "log.txt"):
    shutil.copy(job / name, here / f"{name.split('.')[0]}_mlp_fsdp.txt")

import os  # noqa: E402

os.environ["HTA_DISABLE_NS_ROUNDING"] = "0"
from hta.trace_analysis import TraceAnalysis  # noqa: E402

from distbench.traces.overlap import load_trace  # noqa: E402
from distbench.traces.split import span_states  # noqa: E402

rows = []
with tempfile.TemporaryDirectory() as tmp:
    for r in (0, 1):
        shutil.copy(job / f"inspect/step/trace_rank{r}.json.gz", Path(tmp) / f"trace_rank{r}.json.gz")
    b = TraceAnalysis(trace_dir=tmp).get_temporal_breakdown(visualize=False).set_index("rank")
    for r in (0, 1):
        s = span_states(load_trace(Path(tmp) / f"trace_rank{r}.json.gz"))
        rows.append({"job": "mlp_fsdp", "rank": r, "hta_idle_pct": b.loc[r, "idle_time_pctg"],
                     "hta_compute_pct": b.loc[r, "compute_time_pctg"], "hta_non_compute_pct": b.loc[r, "non_compute_time_pctg"],
                     "ours_idle_pct": round(100 * s["idle"] / s["step_us"], 2),
                     "ours_compute_pct": round(100 * s["compute"] / s["step_us"], 2),
                     "ours_non_compute_pct": round(100 * (s["exposed_comm"] + s["memory_other"]) / s["step_us"], 2)})
pd.DataFrame(rows).to_csv(here / "hta_breakdown.csv", index=False)
print(split.T.to_string())
print(buckets.to_string())
print(pd.DataFrame(rows).to_string())
