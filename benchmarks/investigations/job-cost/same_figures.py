"""Do the figures move when one-node jobs start their ranks directly instead of under torchrun's agent?
The same comm and training jobs through the real launcher in both modes, alternating, on one machine;
their medians side by side.

    python benchmarks/investigations/job-cost/same_figures.py --out-dir DIR --reps 2
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

JOBS = {
    "comm": ("distbench.comm", 2, ["--backend", "nccl", "--ops", "all_reduce,all_gather,reduce_scatter",
                                   "--sizes", "8,64KiB,1MiB,64MiB,1GiB", "--timing", "events,graph", "--trials", "5"]),
    "training": ("distbench.training", 2, ["--backend", "nccl", "--model", "gpt", "--gpt-size", "350m", "--dtype",
                                           "bfloat16", "--batch-size", "8", "--seq-len", "1024", "--steps", "20",
                                           "--warmup-steps", "5"]),
}


def run(name: str, mode: str, out: Path) -> str:
    from distbench.launch.torchrun import TorchrunJob, job_environment, run_torchrun_job

    os.environ["DISTBENCH_ONE_NODE_LAUNCH"] = mode
    module, ws, args = JOBS[name]
    out.parent.mkdir(parents=True, exist_ok=True)
    job = TorchrunJob(module, args + ["--out", str(out), "--placement-out", str(out.with_suffix(".json"))], ws,
                      job_environment({}, {}), 300, [out], out.with_suffix(".json"), out.with_suffix(".log"),
                      lambda m: None)
    return run_torchrun_job(job)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    for rep in range(a.reps):
        for mode in ("torchrun", "direct") if rep % 2 == 0 else ("direct", "torchrun"):
            for name in JOBS:
                print(name, mode, rep, run(name, mode, a.out_dir / f"{name}_{mode}_{rep}.csv"), flush=True)
    frames = []
    for path in sorted(a.out_dir.glob("comm_*.csv")):
        d = pd.read_csv(path)
        frames.append(d.assign(mode=path.stem.split("_")[1]))
    comm = pd.concat(frames)
    comm = comm[comm["status"] == "ok"]
    t = comm.groupby(["op", "size_bytes", "timing", "mode"])["time_us"].median().unstack("mode")
    t["direct/torchrun"] = t["direct"] / t["torchrun"]
    print("comm: median time_us per op (every trial of every rep)\n" + t.round(3).to_string())
    frames = []
    for path in sorted(a.out_dir.glob("training_*.csv")):
        frames.append(pd.read_csv(path).assign(mode=path.stem.split("_")[1]))
    tr = pd.concat(frames)
    s = tr.groupby(["phase", "mode"])["step_time_ms"].median().unstack("mode")
    s["direct/torchrun"] = s["direct"] / s["torchrun"]
    print("training gpt 350m: median step_time_ms per phase\n" + s.round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
