"""Regressions against a baseline (config `report.baseline`: an earlier results tree, or its
`tables/` directory): every comm point, training configuration and memory configuration present in
both, flagged when its figure moved by more than its measured noise AND more than a threshold.

- comm: time_us_median per (backend, world size, nodes, op, traffic, dtype, NCCL env, timing,
  in place, size); noise = the two p5-p95 intervals (a move counts only when they do not overlap);
- training: step_time_ms_median per (backend, model, strategy, world size, config), p5-p95 as above;
- memory: peak_allocated_bytes per (backend, model, config, world size, largest measured batch);
  no spread is recorded, so the threshold alone decides.
Reads tables only (no harness): distbench.report.render renders the result at the top of the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distbench.core.run_label import baseline_tables_dir as tables_dir

DEFAULT_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Measure:
    family: str
    table: str  # file name under tables/
    keys: tuple[str, ...]
    value: str
    low: str | None  # p5 column (None: no noise recorded)
    high: str | None
    worse_when_higher: bool = True
    unit: str = ""


MEASURES = (
    Measure("comm", "comm_summary.csv",
            ("backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes"),
            "time_us_median", "time_us_p5", "time_us_p95", unit="µs"),
    Measure("training", "training_summary.csv", ("backend", "model", "strategy", "world_size", "config"),
            "step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95", unit="ms"),
    Measure("memory", "memory_summary.csv", ("backend", "model", "config", "world_size", "largest_measured_batch"),
            "peak_allocated_bytes", None, None, unit="B"),
)
COLUMNS = ("family", "what", "baseline", "now", "change_pct", "direction", "flagged", "why")


def _read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.exists() and path.stat().st_size else None


def _with_defaults(df: pd.DataFrame) -> pd.DataFrame:
    """Tables written before a key column existed: the value it then had."""
    df = df.copy()
    for col, value in (("nodes", 1), ("traffic", "none"), ("strategy", "ddp")):
        if col not in df:
            df[col] = value
    return df


def compare_one(m: Measure, now: pd.DataFrame, base: pd.DataFrame, threshold_pct: float) -> pd.DataFrame:
    now, base = _with_defaults(now), _with_defaults(base)
    keys = [k for k in m.keys if k in now and k in base]
    ok = [d[d["status"] == "ok"] if "status" in d else d for d in (now, base)]
    cols = keys + [c for c in (m.value, m.low, m.high) if c]
    both = ok[0][cols].merge(ok[1][cols], on=keys, suffixes=("", "_base")).dropna(subset=[m.value, m.value + "_base"])
    rows = []
    for _, r in both.iterrows():
        b, n = float(r[m.value + "_base"]), float(r[m.value])
        if b <= 0:
            continue
        change = 100 * (n / b - 1)
        beyond_threshold = abs(change) >= threshold_pct
        if m.low and pd.notna(r.get(m.low)) and pd.notna(r.get(m.low + "_base")):
            apart = r[m.low] > r[m.high + "_base"] or r[m.high] < r[m.low + "_base"]
            noise = "p5-p95 intervals apart" if apart else "within the p5-p95 noise"
        else:
            apart, noise = True, "no spread recorded"
        worse = (change > 0) == m.worse_when_higher
        rows.append({
            "family": m.family, "what": ", ".join(f"{k}={r[k]}" for k in keys),
            "baseline": b, "now": n, "change_pct": change,
            "direction": ("slower" if m.unit in ("µs", "ms") else "more") if worse else
                         ("faster" if m.unit in ("µs", "ms") else "less"),
            "flagged": bool(beyond_threshold and apart),
            "why": f"{change:+.1f}% ({'beyond' if beyond_threshold else 'within'} {threshold_pct:g}%), {noise}",
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def compare(now_tables: dict, baseline, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> pd.DataFrame:
    """now_tables: {table file name: path of this run's table}; baseline: a results tree or tables dir."""
    base_dir = tables_dir(baseline)
    if base_dir is None:
        raise FileNotFoundError(f"no comm_summary.csv or training_summary.csv under {baseline} (or its tables/)")
    parts = []
    for m in MEASURES:
        now_path = now_tables.get(m.table)
        now = _read(Path(now_path)) if now_path else None
        base = _read(base_dir / m.table)
        if now is not None and base is not None and len(now) and len(base):
            parts.append(compare_one(m, now, base, threshold_pct))
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COLUMNS))
