"""Job CSVs -> tidy tables: raw rows, per-point statistics, and each series at its largest size."""

from __future__ import annotations

import pandas as pd

from distbench.io import atomic_write_csv
from distbench.schema import read_comm_csv

KEYS = ["backend", "world_size", "op", "dtype", "nccl_env", "timing", "inplace", "size_bytes"]
SERIES = [k for k in KEYS if k != "size_bytes"]
# Worst first: a point's status is the worst over its trials.
STATUS_RANK = {"wrong": 0, "failed": 1, "oom": 2, "skipped": 3, "ok": 4}
SUMMARY_COLUMNS = KEYS + [
    "n_trials", "time_us_median", "time_us_p5", "time_us_p95", "time_us_min", "time_us_cv",
    "algbw_gbps_median", "busbw_gbps_median", "busbw_gbps_max", "correct", "status", "message",
]


def combine(paths) -> pd.DataFrame:
    frames = [read_comm_csv(p) for p in paths]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df.sort_values(KEYS + ["trial"], kind="stable").reset_index(drop=True)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Statistics over trials per measurement point (outlier trials stay in the raw table)."""
    rows = []
    for key, g in df.groupby(KEYS, sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        t = ok["time_us"]
        worst = min(g["status"], key=STATUS_RANK.__getitem__)
        corr = g["correct"].dropna()
        rows.append({
            **dict(zip(KEYS, key)),
            "n_trials": len(ok),
            "time_us_median": t.median() if len(t) else float("nan"),
            "time_us_p5": t.quantile(0.05) if len(t) else float("nan"),
            "time_us_p95": t.quantile(0.95) if len(t) else float("nan"),
            "time_us_min": t.min() if len(t) else float("nan"),
            "time_us_cv": (t.std(ddof=0) / t.mean()) if len(t) > 1 and t.mean() > 0 else float("nan"),
            "algbw_gbps_median": ok["algbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_median": ok["busbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_max": ok["busbw_gbps"].max() if len(ok) else float("nan"),
            "correct": bool(corr.all()) if len(corr) else pd.NA,
            "status": worst,
            "message": next((m for m in g["message"] if m), ""),
        })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def largest(summary: pd.DataFrame) -> pd.DataFrame:
    """Each series (backend, ws, op, dtype, env, timing) at its largest size measured ok."""
    ok = summary[summary["status"] == "ok"]
    if ok.empty:
        return ok.copy()
    idx = ok.groupby(SERIES, dropna=False)["size_bytes"].idxmax()
    return ok.loc[idx].sort_values(["op", "backend", "world_size", "timing"]).reset_index(drop=True)


def aggregate(job_csvs, out_raw, out_summary, out_largest) -> pd.DataFrame:
    df = combine(job_csvs)
    summary = summarize(df)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    atomic_write_csv(out_largest, largest(summary))
    return summary
