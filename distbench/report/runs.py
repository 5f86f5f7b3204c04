"""Several hosts in one report (seed 001: Gloo on a laptop, NCCL on a cloud GPU, combined).

Every run writes everything under `results/<run_label>/` (config `run_label`; empty: the variable
DISTBENCH_RUN_LABEL, else the host name): its jobs, tables, figures, logs, and `run.json` (label,
host, GPU, versions, when). Copy another host's `results/<label>/` (its `tables/` and `run.json`
are enough) into this `results/`, and `snakemake --cores 1 report` shows every run found there side
by side, with per-op time ratios between this run and each other one. Reads tables only.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary, primary_rows
from distbench.core.choices import backend_name
from distbench.core.io import atomic_write_text
from distbench.core.units import human_bytes, human_time_us, sig3

def describe_run(env_json, out_path, label: str) -> None:
    """results/<label>/run.json: which run this is (label, host, GPU, versions, when), for the report
    of another host that this results/<label>/ is copied to."""
    env = json.loads(Path(env_json).read_text()) if env_json and Path(env_json).exists() else {}
    gpus = env.get("gpus") or []
    about = {"label": label, "host": env.get("hostname") or socket.gethostname(),
             "gpu": gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None, "gpu_count": len(gpus),
             "torch": env.get("torch"), "nccl_version": env.get("nccl_version"), "git_commit": env.get("git_commit"),
             "exported": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    atomic_write_text(out_path, json.dumps(about, indent=1) + "\n")


def run_dirs(results_dir) -> dict[str, Path]:
    """{label: results/<label>} of every run under results_dir that has a comm summary table."""
    root = Path(results_dir)
    return {d.name: d for d in sorted(root.glob("*")) if (d / "tables" / "comm_summary.csv").exists()}


def load_runs(results_dir, first: str | None = None) -> dict[str, dict]:
    """{label: {"about": run.json, "comm": summary}} for every run under results_dir, `first` first."""
    runs = {}
    for label, d in run_dirs(results_dir).items():
        about = json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {"label": label}
        runs[label] = {"about": about, "comm": normalise_summary(pd.read_csv(d / "tables" / "comm_summary.csv"))}
    if first in runs:
        runs = {first: runs.pop(first), **runs}
    return runs


def runs_table(runs: dict) -> tuple[list[str], list[list]]:
    headers = ["run", "host", "GPU", "backends (world sizes)", "torch", "NCCL", "exported"]
    rows = []
    for label, r in runs.items():
        a, c = r["about"], r["comm"]
        what = "; ".join(f"{backend_name(b)} ({', '.join(str(w) for w in sorted(set(g['world_size'])))})"
                         for b, g in c.groupby("backend", sort=True))
        gpu = f"{a.get('gpu_count')}x {a['gpu']}" if a.get("gpu") else "none"
        rows.append([label, a.get("host"), gpu, what, a.get("torch"), a.get("nccl_version"), a.get("exported")])
    return headers, rows


def side_by_side(runs: dict) -> tuple[list[str], list[list]]:
    """Per op: each run's busbw (and time) at the largest size it measured ok, per backend at its
    largest world size (primary timing)."""
    cols, cells = [], {}
    for label, r in runs.items():
        p = primary_rows(r["comm"])
        for backend, g in p.groupby("backend", sort=True):
            ws = int(g["world_size"].max())
            cols.append((label, backend, ws))
            for op, o in g[g["world_size"] == ws].groupby("op", sort=False):
                best = o.sort_values("size_bytes").iloc[-1]
                bw = best["busbw_gbps_median"]
                cells[(op, label, backend, ws)] = (f"{sig3(bw)} GB/s" if pd.notna(bw) else human_time_us(best["time_us_median"])) \
                    + f" ({human_bytes(best['size_bytes'])})"
    ops = list(dict.fromkeys(op for op, *_ in cells))
    headers = ["op"] + [f"{label}: {backend_name(b)} ws{w}" for label, b, w in cols]
    return headers, [[op] + [cells.get((op, *c)) for c in cols] for op in ops]


def ratios(runs: dict, a: str, b: str) -> tuple[list[str], list[list]]:
    """Per op and world size both runs measured: the largest common size, each run's fastest
    primary time there, and b's time / a's (below 1: b is faster)."""
    pa, pb = primary_rows(runs[a]["comm"]), primary_rows(runs[b]["comm"])
    headers = ["op", "ranks", "size", f"{a}", f"{b}", f"{b} / {a} time"]
    rows = []
    for op in dict.fromkeys(pa["op"]):
        for ws in sorted(set(pa.loc[pa["op"] == op, "world_size"]) & set(pb.loc[pb["op"] == op, "world_size"])):
            xa = pa[(pa["op"] == op) & (pa["world_size"] == ws)]
            xb = pb[(pb["op"] == op) & (pb["world_size"] == ws)]
            common = sorted(set(xa["size_bytes"]) & set(xb["size_bytes"]))
            if not common:
                continue
            size = common[-1]
            ra = xa[xa["size_bytes"] == size].sort_values("time_us_median").iloc[0]
            rb = xb[xb["size_bytes"] == size].sort_values("time_us_median").iloc[0]
            rows.append([op, int(ws), human_bytes(size),
                         f"{human_time_us(ra['time_us_median'])} ({backend_name(ra['backend'])})",
                         f"{human_time_us(rb['time_us_median'])} ({backend_name(rb['backend'])})",
                         f"{rb['time_us_median'] / ra['time_us_median']:.3g}x"])
    return headers, rows
