"""Comm job CSVs -> tidy tables: the raw rows (checked against the contract), every rank's times, the
summary per point, each series at its largest size and the stragglers.

The job CSVs are read by distbench.core.tables (one message naming every unreadable file).
"""

from __future__ import annotations

import pandas as pd

from distbench.core.choices import STATUS_SEVERITY
from distbench.core.io import atomic_write_csv
from distbench.comm.contract import COMM, COMM_RANKS, host_bound
from distbench.core.tables import JobCsvError, combine

# One row per requested size: a split op's size_bytes is rounded to the world size, so the requested
# size is what lines up jobs of different world sizes (the report's rows), size_bytes what was measured.
KEYS = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
        "requested_bytes"]
SERIES = [k for k in KEYS if k not in ("size_bytes", "requested_bytes")]
# Worst first: a point's status is the worst over its trials.
SUMMARY_COLUMNS = KEYS + [
    "n_trials", "rank_agg", "time_us_median", "time_us_p5", "time_us_p95", "time_us_min", "time_us_cv",
    "host_issue_us_median", "host_bound",
    "algbw_gbps_median", "busbw_gbps_median", "busbw_gbps_max", "rank_spread_pct_median",
    "busiest_rank", "busiest_rank_bytes", "busiest_rank_time_us_median", "correct", "status", "message",
]


def rank_spread_pct(df: pd.DataFrame) -> pd.Series:
    """Per trial: how much faster the fastest rank was than the slowest, in % of the slowest."""
    return (df["time_us_rank_max"] - df["time_us_rank_min"]) / df["time_us_rank_max"] * 100


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Statistics over trials per measurement point (outlier trials stay in the raw table)."""
    if "requested_bytes" not in df:  # a frame not read through the contract, from before the column
        df = df.assign(requested_bytes=df["size_bytes"])
    if "host_issue_us" not in df:  # likewise, from before the host's issue time was taken
        df = df.assign(host_issue_us=float("nan"))
    rows = []
    for key, g in df.groupby(KEYS, sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        t = ok["time_us"]
        issue = ok["host_issue_us"].median() if len(ok) else float("nan")
        worst = min(g["status"], key=STATUS_SEVERITY.__getitem__)
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
            # the GPU waited for the host: the median time is torch's per-call host cost, not the link's
            "host_issue_us_median": issue,
            "host_bound": host_bound(t.median(), issue) if len(t) else False,
            "algbw_gbps_median": ok["algbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_median": ok["busbw_gbps"].median() if len(ok) else float("nan"),
            "busbw_gbps_max": ok["busbw_gbps"].max() if len(ok) else float("nan"),
            "rank_spread_pct_median": rank_spread_pct(ok).median() if len(ok) else float("nan"),
            # all_to_all_v: the same rank and bytes in every trial (the matrix fixes them)
            "busiest_rank": g["busiest_rank"].dropna().iloc[0] if g["busiest_rank"].notna().any() else pd.NA,
            "busiest_rank_bytes": (g["busiest_rank_bytes"].dropna().iloc[0] if g["busiest_rank_bytes"].notna().any()
                                   else pd.NA),
            "busiest_rank_time_us_median": ok["busiest_rank_time_us"].median() if len(ok) else float("nan"),
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


# A straggler: one rank ready last in most timed trials of a job, by a margin that matters.
STRAGGLER_MIN_TRIALS = 10
STRAGGLER_MIN_SHARE = 0.75  # of the job's trials
STRAGGLER_MIN_SKEW_US = 200.0  # below this, host jitter; and at least this share of a trial:
STRAGGLER_MIN_SKEW_OF_TRIAL = 0.1
# and at least one op: the trials start after an aligning op, and a collective's own algorithm lets
# the same rank leave it last (the last receiver), by up to about one op's time on a busy host.
JOB_KEYS = ["backend", "world_size", "nodes", "dtype", "nccl_env"]
STRAGGLER_COLUMNS = JOB_KEYS + ["n_trials", "last_rank", "last_share", "arrival_skew_us_median",
                                "trial_us_median", "straggler"]


def stragglers(df: pd.DataFrame) -> pd.DataFrame:
    """Per comm job (rows with status ok and an arrival record): the rank that was ready last most
    often, in what share of the trials, the median arrival skew (how long the first rank waited),
    the median trial duration (time_us x iters), and whether that rank is a straggler: last in at
    least STRAGGLER_MIN_SHARE of >= STRAGGLER_MIN_TRIALS trials, with a median skew of at least
    STRAGGLER_MIN_SKEW_US, STRAGGLER_MIN_SKEW_OF_TRIAL of a trial and one op (the median of the
    fastest rank's time per op). Random jitter spreads "last" over the ranks; a slow host makes the
    same rank last every time, and so can the aligning op's exit order, but by less than one op."""
    ok = df[(df["status"] == "ok") & df["last_rank"].notna() & (df["world_size"] > 1)] if len(df) else df
    rows = []
    for key, g in ok.groupby(JOB_KEYS, sort=True, dropna=False) if len(ok) else []:
        counts = g["last_rank"].astype(int).value_counts()
        share = counts.iloc[0] / len(g)
        skew = float(g["arrival_skew_us"].median())
        trial_us = float((g["time_us"] * g["iters"]).median())
        op_us = float(g["time_us_rank_min"].fillna(g["time_us"]).median())
        flagged = bool(len(g) >= STRAGGLER_MIN_TRIALS and share >= STRAGGLER_MIN_SHARE
                       and skew >= max(STRAGGLER_MIN_SKEW_US, STRAGGLER_MIN_SKEW_OF_TRIAL * trial_us, op_us))
        rows.append([*key, len(g), int(counts.index[0]), share, skew, trial_us, flagged])
    return pd.DataFrame(rows, columns=STRAGGLER_COLUMNS)


def _no_rows(contract) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in contract.names})


def aggregate(job_csvs, rank_csvs, out_raw, out_ranks, out_summary, out_largest, out_stragglers=None,
              join=None) -> pd.DataFrame:
    """The comm tables from every job's CSVs. No comm job in the plan (backends [nccl] on a host without
    a GPU: every NCCL job skipped, as the default run skips them): the tables with their columns and no
    row, so the report still says what was skipped. `join(summary) -> summary`: what the
    probes add to each point (distbench.comm.analysis.diagnose), before the summary is written, once."""
    problems = []  # every bad file, of both kinds, in one message
    df, ranks = _no_rows(COMM), _no_rows(COMM_RANKS)
    try:
        if job_csvs:
            df = combine(job_csvs, COMM, sort_by=(*KEYS, "trial"))
    except JobCsvError as e:
        problems += e.problems
    try:
        if rank_csvs:
            ranks = combine(rank_csvs, COMM_RANKS, sort_by=(*KEYS, "trial", "rank"))
    except JobCsvError as e:
        problems += e.problems
    if problems:
        raise JobCsvError(problems)
    summary = summarize(df)
    atomic_write_csv(out_ranks, ranks)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_largest, largest(summary))
    if join is not None:
        summary = join(summary)
    atomic_write_csv(out_summary, summary)
    if out_stragglers is not None:
        atomic_write_csv(out_stragglers, stragglers(df))
    return summary
