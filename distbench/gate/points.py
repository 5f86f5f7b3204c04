"""The gate's collective points from a comm CSV (the comm family's comm.csv columns: one row per
trial), and a baseline's: `--baseline` (or config report.baseline) names a known-good run of the same
node type: a gate's output directory (gate_comm.csv, or health/gate/gate_comm.csv of `snakemake gate`), a
full run's results/<label>/ (tables/comm.csv), its tables/ directory, or a run label under results/.
Torch-free."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from statistics import median

import pandas as pd

from distbench.gate.rules import Point

# where a baseline's trials are, in order of preference: the gate's own, then a full run's table
BASELINE_FILES = ("gate_comm.csv", "health/gate/gate_comm.csv", "tables/comm.csv", "comm.csv")


def points_from_csv(path) -> list[Point]:
    df = pd.read_csv(path)
    if df.empty:
        return []
    for col, default in (("nccl_env", "default"), ("message", ""), ("status", "ok"), ("inplace", False)):
        if col not in df:
            df[col] = default
    out, seen = [], set()
    keys = ["backend", "world_size", "op", "size_bytes", "timing", "nccl_env"]
    for key, g in df.groupby([*keys, "inplace"], sort=False):
        backend, ws, op, size, timing, env, _ = key
        if key[:-1] in seen:  # an op measured both in and out of place: the first (the comm job's order)
            continue
        seen.add(key[:-1])
        ok = g[g["status"] == "ok"]
        status = "ok" if len(ok) == len(g) else str(g[g["status"] != "ok"]["status"].iloc[0])
        msg = "" if status == "ok" else str(g[g["status"] != "ok"]["message"].iloc[0])
        out.append(Point(str(backend), int(ws), str(op), int(size), str(timing), str(env),
                         tuple(pd.to_numeric(ok["busbw_gbps"], errors="coerce").tolist()),
                         tuple(pd.to_numeric(ok["time_us"], errors="coerce").tolist()), status, msg))
    return out


def find_baseline(given: str) -> tuple[Path | None, str]:
    """(the baseline's comm CSV, "") or (None, why not)."""
    if not given:
        return None, ""
    candidates = [Path(given), Path("results") / given]
    for root in candidates:
        if root.is_file():
            return root, ""
        for name in BASELINE_FILES:
            if (root / name).is_file():
                return root / name, ""
    return None, (f"baseline {given}: no {', '.join(BASELINE_FILES)} under it (a gate's output directory, "
                  "a run's results/<label>/ or its tables/)")


def baseline_points(given) -> tuple[dict | None, str]:
    """{(backend, world_size, op, size, timing, nccl_env): Point} of the baseline, or (None, why).
    `given`: one baseline or several runs (a list): several are pooled, each run's median kept
    (Point.run_busbw_gbps, run_time_us), so the noise they are judged by includes run to run."""
    runs = [given] if isinstance(given, str) else [g for g in given or () if g]
    if not runs or runs == [""]:
        return None, ""
    pooled: dict = {}
    where = []
    for one in runs:
        path, why = find_baseline(one)
        if path is None:
            return None, why
        try:
            pts = points_from_csv(path)
        except (OSError, ValueError, KeyError) as e:
            return None, f"baseline {path}: unreadable ({e})"
        where.append(str(path))
        for p in pts:
            pooled.setdefault((p.backend, p.world_size, p.op, p.size_bytes, p.timing, p.nccl_env), []).append(p)
    out = {}
    for key, pts in pooled.items():
        p = pts[0]
        if len(pts) > 1:
            ok = [q for q in pts if q.status == "ok"]
            p = replace(p, busbw_gbps=tuple(v for q in ok for v in q.busbw_gbps),
                        time_us=tuple(v for q in ok for v in q.time_us),
                        run_busbw_gbps=tuple(_median(q.busbw_gbps) for q in ok),
                        run_time_us=tuple(_median(q.time_us) for q in ok),
                        status="ok" if len(ok) == len(pts) else next(q.status for q in pts if q.status != "ok"))
        out[key] = p
    return out, ", ".join(where) if len(where) < 3 else f"{len(where)} runs ({where[0]}, ...)"


def _median(values) -> float:
    vals = [v for v in values if v == v]
    return float(median(vals)) if vals else float("nan")


def baseline_problems(given, key: str = "gate_baseline") -> list[str]:
    """The config's baseline runs that hold no gate or comm table, each named by key and element."""
    return [f"config key {key}[{i}]: {why}" for i, one in enumerate(given or ())
            for path, why in [find_baseline(one)] if path is None]
