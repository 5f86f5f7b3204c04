"""The gate's collective points from a comm CSV (the comm family's comm.csv columns: one row per
trial), and a baseline's: `--baseline` (or config gate_baseline) names a known-good run of the same
node type: a gate's output directory (gate_comm.csv, or health/gate/gate_comm.csv of `snakemake gate`), a
full run's results/<label>/ (tables/comm.csv), its tables/ directory, or a run label under results/.
Torch-free."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from statistics import median

import pandas as pd

from distbench.gate.rules import Point

# where a baseline's trials are, in order of preference: the gate's own, then a full run's table
BASELINE_FILES = ("gate_comm.csv", "health/gate/gate_comm.csv", "tables/comm.csv", "comm.csv")


KEYS = ["backend", "world_size", "op", "size_bytes", "timing", "nccl_env"]
REQUIRED = ("backend", "world_size", "op", "size_bytes", "timing", "time_us", "busbw_gbps")


def points_from_csv(path, dropped: list | None = None) -> list[Point]:
    """The points of a comm CSV. ValueError when it is no comm table (a column missing). Rows whose
    point cannot be known (a truncated line: its op, size or ranks missing) are left out, and counted
    in `dropped` when given."""
    df = pd.read_csv(path)
    missing = [c for c in REQUIRED if c not in df]
    if missing:
        raise ValueError(f"not a comm table: no column {', '.join(missing)}")
    if df.empty:
        return []
    for col, default in (("nccl_env", "default"), ("message", ""), ("status", "ok"), ("inplace", False)):
        if col not in df:
            df[col] = default
    df = df.assign(world_size=pd.to_numeric(df["world_size"], errors="coerce"),
                   size_bytes=pd.to_numeric(df["size_bytes"], errors="coerce"))
    whole = df.dropna(subset=[*KEYS, "inplace"])
    if dropped is not None and len(whole) < len(df):
        dropped.append(len(df) - len(whole))
    out, seen = [], set()
    for key, g in whole.groupby([*KEYS, "inplace"], sort=False):
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


def usable(values) -> tuple[float, ...]:
    """The figures a comparison can use: finite and positive (NaN, inf, 0 or negative is no measurement)."""
    return tuple(float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0)


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


def _other_node_type(path: Path, gpu_name: str | None) -> str:
    """Why a gate's baseline run is of another node type (its readings.json names other GPUs), or ""."""
    try:
        theirs = json.loads((path.parent / "readings.json").read_text()).get("gpu_name")
    except (OSError, ValueError, AttributeError):
        return ""
    if gpu_name and theirs and theirs != gpu_name:
        return f"another node type: its GPUs are {theirs}, this node's {gpu_name}"
    return ""


def _run_points(path: Path, notes: list[str]) -> list[Point]:
    """One run's points a comparison can use: ok, with usable figures; what is left out said in `notes`."""
    dropped: list = []
    pts = points_from_csv(path, dropped)
    if dropped:
        notes.append(f"{path}: {dropped[0]} truncated row(s) left out")
    out = []
    for p in pts:
        if p.status != "ok":
            notes.append(f"{path}: {p.label} {p.status}{': ' + p.message[:120] if p.message else ''}; left out")
            continue
        time_us = usable(p.time_us)
        if not time_us:
            notes.append(f"{path}: {p.label}: no finite positive figure; left out")
            continue
        if len(time_us) < len(p.time_us):
            notes.append(f"{path}: {p.label}: {len(p.time_us) - len(time_us)} trial(s) of no finite positive "
                         "figure left out")
        # busbw at 8 B may be 0 (a latency point): only usable values are kept, the busbw check needs them
        out.append(replace(p, time_us=time_us, busbw_gbps=usable(p.busbw_gbps)))
    return out


def baseline_points(given, gpu_name: str | None = None) -> tuple[dict | None, str, list[str]]:
    """({(backend, world_size, op, size, timing, nccl_env): Point}, where, notes) of the baseline, or
    (None, why, notes) when no run of it can be compared. `given`: one baseline or several runs (a
    list): several are pooled, each run's median kept (Point.run_busbw_gbps, run_time_us), so the noise
    they are judged by includes run to run. A run, or a run's point, that cannot be used (not found,
    unreadable, no comm table, another node type, failed, no finite positive figure) is left out and
    said in `notes`: the good runs still count, and one bad point does not void the others' pool."""
    runs = [given] if isinstance(given, str) else [g for g in given or () if g]
    if not runs:
        return None, "", []
    pooled: dict = {}
    where, notes = [], []
    for one in runs:
        path, why = find_baseline(one)
        if path is None:
            notes.append(why)
            continue
        other = _other_node_type(path, gpu_name)
        if other:
            notes.append(f"{path}: {other}; left out")
            continue
        try:
            pts = _run_points(path, notes)
        except (OSError, ValueError, KeyError) as e:
            notes.append(f"baseline {path}: not a readable comm table ({' '.join(str(e).split())[:200]})")
            continue
        if not pts:
            notes.append(f"baseline {path}: no measured point a comparison can use")
            continue
        where.append(str(path))
        for p in pts:
            pooled.setdefault((p.backend, p.world_size, p.op, p.size_bytes, p.timing, p.nccl_env), []).append(p)
    if not pooled:
        return None, "; ".join(notes), notes
    out = {}
    for key, pts in pooled.items():
        p = pts[0]
        if len(where) > 1:  # the runs' medians measure run-to-run noise (a run without this point: not in it)
            p = replace(p, busbw_gbps=tuple(v for q in pts for v in q.busbw_gbps),
                        time_us=tuple(v for q in pts for v in q.time_us),
                        run_busbw_gbps=tuple(m for q in pts for m in [_median(q.busbw_gbps)] if m == m),
                        run_time_us=tuple(_median(q.time_us) for q in pts))
        out[key] = p
    return out, ", ".join(where) if len(where) < 3 else f"{len(where)} runs ({where[0]}, ...)", notes


def _median(values) -> float:
    vals = [v for v in values if v == v]
    return float(median(vals)) if vals else float("nan")
