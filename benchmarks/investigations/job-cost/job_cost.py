"""Per-job fixed cost (issue 25): trivial jobs of each family through the real launcher
(distbench.launch.torchrun.run_torchrun_job), each rank's phase marks (distbench.launch.timeline)
turned into a breakdown, for both one-node launches (torchrun's agent, or ranks started directly).

    python benchmarks/investigations/job-cost/job_cost.py --backend nccl --reps 3 --out job_cost.csv
    python benchmarks/investigations/job-cost/job_cost.py --old-tree DIR ...   # total wall of an older checkout

Jobs: comm at 2 ranks (all_reduce, 8 B, one trial of 20 ops: nothing to measure, so the wall time is
the fixed cost), training at 1 and 2 ranks (a 2-layer MLP, hidden 32, 2 steps per phase), memory at 1
rank (the MLP at batch 4, no search). `--old-tree` runs the same commands from another checkout
(PYTHONPATH) with its own launcher and reports only the wall time (it has no marks).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = {  # name: (module, world size, arguments)
    "comm_ws2": ("distbench.comm", 2, ["--ops", "all_reduce", "--sizes", "8", "--trials", "1", "--warmup", "1"]),
    "training_ws1": ("distbench.training", 1, ["--hidden-dim", "32", "--num-layers", "2", "--batch-size", "4",
                                               "--steps", "2", "--warmup-steps", "1", "--allreduce-trials", "2"]),
    "training_ws2": ("distbench.training", 2, ["--hidden-dim", "32", "--num-layers", "2", "--batch-size", "4",
                                               "--steps", "2", "--warmup-steps", "1", "--allreduce-trials", "2"]),
    "memory_ws1": ("distbench.memory", 1, ["--model", "mlp", "--hidden-dim", "32", "--num-layers", "2",
                                           "--batch-sizes", "4", "--search", "false"]),
}

DRIVER = r"""
import json, sys, time
from pathlib import Path
from distbench.launch.torchrun import TorchrunJob, run_torchrun_job, job_environment
module, ws, out_dir, args = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
out = out_dir / "out.csv"
job = TorchrunJob(module=module, args=args + ["--out", str(out), "--placement-out", str(out_dir / "placement.json")],
                  world_size=ws, env=job_environment({}, {}), timeout_s=300, outputs=[out],
                  placement_json=out_dir / "placement.json", log_path=out_dir / "job.log", write_failure=lambda m: None)
t0 = time.time()
status = run_torchrun_job(job)
wall = time.time() - t0
try:
    timeline = json.loads((out_dir / "placement.json").read_text())["provenance"].get("timeline", {})
except Exception:
    timeline = {}
print("RESULT " + json.dumps({"status": status, "wall_s": wall, "timeline": timeline}))
"""


def run_one(tree: Path, mode: str, name: str, backend: str) -> dict:
    module, ws, args = JOBS[name]
    with tempfile.TemporaryDirectory(prefix="jobcost-") as d:
        env = {**os.environ, "PYTHONPATH": str(tree), "DISTBENCH_ONE_NODE_LAUNCH": mode}
        p = subprocess.run([sys.executable, "-c", DRIVER, module, str(ws), d, "--backend", backend, *args],
                           env=env, capture_output=True, text=True, timeout=400, cwd=tree)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            return {"status": f"driver failed: {p.stderr.strip().splitlines()[-1:] }", "wall_s": float("nan"), "timeline": {}}
        res = json.loads(line[7:])
        if res["status"] != "ok":
            res["log_tail"] = Path(d, "job.log").read_text(errors="replace")[-600:]
        return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="torchrun,direct")
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--old-tree", type=Path, help="also time this older checkout (its own launcher; wall only)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    here = Path(__file__).resolve().parents[3]
    trees = [("new", here)] + ([("old", a.old_tree.resolve())] if a.old_tree else [])
    rows = []
    for rep in range(a.reps):
        for label, tree in trees:
            for mode in (a.modes.split(",") if label == "new" else ["torchrun"]):
                for name in a.jobs.split(","):
                    r = run_one(tree, mode, name, a.backend)
                    row = {"tree": label, "mode": mode, "job": name, "rep": rep, "status": r["status"][:120],
                           "wall_s": round(r["wall_s"], 3), **r.get("timeline", {})}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if "log_tail" in r:
                        print(r["log_tail"], flush=True)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
