"""Job CSVs -> tidy tables: per family, the raw rows (checked against its contract) and a summary.

Every job CSV is a cached output Snakemake will not remake while it is newer than its inputs, so a
file that was truncated or edited by hand would poison every table after it. Each one is read on
its own; whatever is wrong with it (torn rows, renamed columns, values the contract does not allow,
text that does not parse) becomes one JobCsvError naming the files, what is wrong with each and how
to get a good one back. The workflow scripts end with that message, never a traceback
(distbench.workflow.run_in_rule).
"""

from __future__ import annotations

import csv
import io
import shlex
from pathlib import Path

import pandas as pd

from distbench.choices import STATUS_SEVERITY
from distbench.io import atomic_write_csv
from distbench.schema import (
    COMM, COMM_RANKS, MEMORY, TRAINING, Contract, SchemaError, read_comm_csv, read_comm_ranks_csv, read_memory_csv,
    read_training_csv,
)

KEYS = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes"]
SERIES = [k for k in KEYS if k != "size_bytes"]
# Worst first: a point's status is the worst over its trials.
SUMMARY_COLUMNS = KEYS + [
    "n_trials", "rank_agg", "time_us_median", "time_us_p5", "time_us_p95", "time_us_min", "time_us_cv",
    "algbw_gbps_median", "busbw_gbps_median", "busbw_gbps_max", "rank_spread_pct_median",
    "busiest_rank", "busiest_rank_bytes", "busiest_rank_time_us_median", "correct", "status", "message",
]


# reader -> (its contract, the rule whose output the file is)
JOB_CSV_READERS = {
    read_comm_csv: (COMM, "comm_job"),
    read_comm_ranks_csv: (COMM_RANKS, "comm_job"),
    read_training_csv: (TRAINING, "training_job"),
    read_memory_csv: (MEMORY, "memory_job"),
}


class JobCsvError(SchemaError):
    """One or more cached job CSVs cannot be read. `problems`: (path, what is wrong, rule) per file;
    the message names each file and what is wrong with it, and says how to remake it."""

    def __init__(self, problems):
        self.problems = [(str(p), what, rule) for p, what, rule in problems]
        super().__init__(self._message())

    def _message(self) -> str:
        n = len(self.problems)
        head = ("a cached job CSV cannot be read:" if n == 1 else f"{n} cached job CSVs cannot be read:")
        lines = [head] + [f"  {p}: {what}" for p, what, _ in self.problems]
        lines.append(("It is" if n == 1 else "Each is") + " a benchmark job's output that was truncated, corrupted "
                     "or edited by hand. Delete it so that Snakemake runs that job again:")
        lines.append("  rm " + " ".join(shlex.quote(p) for p, _, _ in self.problems))
        rules = sorted({rule for _, _, rule in self.problems})
        lines.append("or rerun every such job: " + " ".join(f"snakemake -R {r}" for r in rules)
                     + " (add your usual options, e.g. --configfile).")
        return "\n".join(lines)


def _structure_problem(path: Path, contract: Contract) -> str | None:
    """What makes this file unreadable as a CSV of the contract, before pandas guesses around it: no
    text, a torn last row, rows with the wrong number of fields, columns renamed, added or missing."""
    data = path.read_bytes()
    if not data.strip():
        return "the file is empty (not even a header)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 text (byte {e.start} is {data[e.start:e.start + 1]!r})"
    if not text.endswith("\n"):
        return "it ends in the middle of a row (no newline after the last line): the file was truncated"
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
        names = contract.names
        fillable = {name for name, _ in contract.filled_when_missing}  # older files lack them: filled on reading
        missing = [c for c in names if c not in header and c not in fillable]
        extra = [c for c in header if c not in names]
        dup = sorted({c for c in header if header.count(c) > 1})
        if missing or extra or dup:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else []) \
                + ([f"repeated {dup}"] if dup else [])
            return (f"its header does not match the {contract.name} CSV contract: " + ", ".join(parts)
                    + (" (a column renamed?)" if missing and extra else ""))
        for row in reader:
            if row and len(row) != len(header):
                return (f"line {reader.line_num} has {len(row)} fields where the header has {len(header)}"
                        " (a torn or hand-edited row)")
    except csv.Error as e:
        return f"not valid CSV at line {reader.line_num}: {e}"
    return None


def read_job_csv(path, read=read_comm_csv) -> pd.DataFrame:
    """One job CSV through its family's reader; anything wrong with it raises JobCsvError."""
    contract, rule = JOB_CSV_READERS[read]
    path = Path(path)
    try:
        problem = _structure_problem(path, contract)
        if problem is None:
            return read(path)
    except SchemaError as e:
        problem = str(e)
    except (ValueError, KeyError, TypeError, OverflowError, pd.errors.ParserError) as e:
        problem = f"a value does not parse as its column's type in the {contract.name} CSV contract ({e})"
    except OSError as e:
        problem = f"cannot be read: {e.strerror or e}"
    raise JobCsvError([(path, problem, rule)])


def read_job_csvs(paths, read=read_comm_csv) -> list[pd.DataFrame]:
    """Every file read; the problems of all bad ones together in one JobCsvError."""
    frames, problems = [], []
    for p in paths:
        try:
            frames.append(read_job_csv(p, read))
        except JobCsvError as e:
            problems += e.problems
    if problems:
        raise JobCsvError(problems)
    return frames


def combine(paths, read=read_comm_csv, sort_by=(*KEYS, "trial")) -> pd.DataFrame:
    """Every job CSV of one family in one frame, sorted by the columns of sort_by it has (the
    per-rank CSV has no `nodes`)."""
    frames = read_job_csvs(paths, read)
    non_empty = [f for f in frames if len(f)]  # pandas warns on concatenating empty frames
    df = pd.concat(non_empty or frames, ignore_index=True)
    return df.sort_values([c for c in sort_by if c in df.columns], kind="stable").reset_index(drop=True)


def rank_spread_pct(df: pd.DataFrame) -> pd.Series:
    """Per trial: how much faster the fastest rank was than the slowest, in % of the slowest."""
    return (df["time_us_rank_max"] - df["time_us_rank_min"]) / df["time_us_rank_max"] * 100


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Statistics over trials per measurement point (outlier trials stay in the raw table)."""
    rows = []
    for key, g in df.groupby(KEYS, sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        t = ok["time_us"]
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
JOB_KEYS = ["backend", "world_size", "nodes", "dtype", "nccl_env"]
STRAGGLER_COLUMNS = JOB_KEYS + ["n_trials", "last_rank", "last_share", "arrival_skew_us_median",
                                "trial_us_median", "straggler"]


def stragglers(df: pd.DataFrame) -> pd.DataFrame:
    """Per comm job (rows with status ok and an arrival record): the rank that was ready last most
    often, in what share of the trials, the median arrival skew (how long the first rank waited),
    the median trial duration (time_us x iters), and whether that rank is a straggler: last in at
    least STRAGGLER_MIN_SHARE of >= STRAGGLER_MIN_TRIALS trials, with a median skew of at least
    STRAGGLER_MIN_SKEW_US and STRAGGLER_MIN_SKEW_OF_TRIAL of a trial. Random jitter spreads "last"
    over the ranks; a slow host makes the same rank last every time."""
    ok = df[(df["status"] == "ok") & df["last_rank"].notna() & (df["world_size"] > 1)] if len(df) else df
    rows = []
    for key, g in ok.groupby(JOB_KEYS, sort=True, dropna=False) if len(ok) else []:
        counts = g["last_rank"].astype(int).value_counts()
        share = counts.iloc[0] / len(g)
        skew = float(g["arrival_skew_us"].median())
        trial_us = float((g["time_us"] * g["iters"]).median())
        flagged = bool(len(g) >= STRAGGLER_MIN_TRIALS and share >= STRAGGLER_MIN_SHARE
                       and skew >= max(STRAGGLER_MIN_SKEW_US, STRAGGLER_MIN_SKEW_OF_TRIAL * trial_us))
        rows.append([*key, len(g), int(counts.index[0]), share, skew, trial_us, flagged])
    return pd.DataFrame(rows, columns=STRAGGLER_COLUMNS)


def aggregate(job_csvs, rank_csvs, out_raw, out_ranks, out_summary, out_largest, out_stragglers=None) -> pd.DataFrame:
    problems = []  # every bad file, of both kinds, in one message
    try:
        df = combine(job_csvs)
    except JobCsvError as e:
        problems += e.problems
    try:
        ranks = combine(rank_csvs, read_comm_ranks_csv, sort_by=(*KEYS, "trial", "rank"))
    except JobCsvError as e:
        problems += e.problems
    if problems:
        raise JobCsvError(problems)
    summary = summarize(df)
    atomic_write_csv(out_ranks, ranks)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    atomic_write_csv(out_largest, largest(summary))
    if out_stragglers is not None:
        atomic_write_csv(out_stragglers, stragglers(df))
    return summary


def aggregate_training(job_csvs, out_raw, out_summary, cost_gpu_hour_usd=None) -> pd.DataFrame:
    """Training job CSVs -> results/<label>/tables/training.csv (checked against the contract) and the
    per-configuration summary with scaling efficiency, exposed communication and overlap."""
    from distbench.scaling import add_scaling, summarize_training

    df = combine(job_csvs, read_training_csv, sort_by=("backend", "config", "world_size", "phase", "step"))
    summary = add_scaling(summarize_training(df), cost_gpu_hour_usd)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary


def aggregate_memory(job_csvs, out_raw, out_summary) -> pd.DataFrame:
    """Memory job CSVs -> results/<label>/tables/memory.csv (checked against the contract) and the per-job
    summary (activation cost per sample, the allocator's view, the largest batch that fits)."""
    from distbench.memory_analysis import summarize_memory

    df = combine(job_csvs, read_memory_csv, sort_by=("backend", "model", "config", "world_size", "phase", "batch_size"))
    summary = summarize_memory(df)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary
