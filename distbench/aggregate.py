"""Job CSVs -> tidy tables: per family, the raw rows (checked against its contract) and a summary."""

from __future__ import annotations

import pandas as pd

from distbench.io import atomic_write_csv
from distbench.schema import read_comm_csv, read_comm_ranks_csv

KEYS = ["backend", "world_size", "op", "dtype", "nccl_env", "timing", "inplace", "size_bytes"]
SERIES = [k for k in KEYS if k != "size_bytes"]
# Worst first: a point's status is the worst over its trials.
STATUS_RANK = {"wrong": 0, "failed": 1, "oom": 2, "skipped": 3, "ok": 4}
SUMMARY_COLUMNS = KEYS + [
    "n_trials", "rank_agg", "time_us_median", "time_us_p5", "time_us_p95", "time_us_min", "time_us_cv",
    "algbw_gbps_median", "busbw_gbps_median", "busbw_gbps_max", "rank_spread_pct_median", "correct", "status",
    "message",
]


def combine(paths, read=read_comm_csv, order=("trial",)) -> pd.DataFrame:
    frames = [read(p) for p in paths]
    non_empty = [f for f in frames if len(f)]  # pandas warns on concatenating empty frames
    df = pd.concat(non_empty or frames, ignore_index=True)
    return df.sort_values(KEYS + list(order), kind="stable").reset_index(drop=True)


def rank_spread_pct(df: pd.DataFrame) -> pd.Series:
    """Per trial: how much faster the fastest rank was than the slowest, in % of the slowest."""
    return (df["time_us_rank_max"] - df["time_us_rank_min"]) / df["time_us_rank_max"] * 100


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
            "rank_agg": g["rank_agg"].iloc[0],
            "time_us_median": t.median() if len(t) else float("nan"),
            "time_us_p5": t.quantile(0.05) if len(t) else float("nan"),
            "time_us_p95": t.quantile(0.95) if len(t) else float("nan"),
            "time_us_min": t.min() if len(t) else float("nan"),
            "time_us_cv": (t.std(ddof=0) / t.mean()) if len(t) > 1 and t.mean() > 0 else float("nan"),
            "algbw_gbps_median": ok["algbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_median": ok["busbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_max": ok["busbw_gbps"].max() if len(ok) else float("nan"),
            "rank_spread_pct_median": rank_spread_pct(ok).median() if len(ok) else float("nan"),
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


def aggregate(job_csvs, rank_csvs, out_raw, out_ranks, out_summary, out_largest) -> pd.DataFrame:
    df = combine(job_csvs)
    summary = summarize(df)
    atomic_write_csv(out_ranks, combine(rank_csvs, read_comm_ranks_csv, order=("trial", "rank")))
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    atomic_write_csv(out_largest, largest(summary))
    return summary


def aggregate_training(job_csvs, out_raw, out_summary, cost_gpu_hour_usd=None) -> pd.DataFrame:
    """Training job CSVs -> results/tables/training.csv (checked against the contract) and the
    per-configuration summary with scaling efficiency, exposed communication and overlap."""
    from distbench.scaling import add_scaling, summarize_training
    from distbench.schema import read_training_csv

    frames = [read_training_csv(p) for p in job_csvs]
    df = pd.concat([f for f in frames if len(f)] or frames, ignore_index=True)
    df = df.sort_values(["backend", "config", "world_size", "phase", "step"], kind="stable").reset_index(drop=True)
    summary = add_scaling(summarize_training(df), cost_gpu_hour_usd)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary
