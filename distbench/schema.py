"""The CSV contracts of every comm job and of results/tables/comm.csv / comm_ranks.csv.

comm.csv: one row per measurement (backend, world_size, op, dtype, nccl_env, timing, inplace,
size_bytes, trial), its time aggregated over ranks. comm_ranks.csv: the same keys plus `rank`, one
row per rank and trial. Written down once here; the harness writes these columns, aggregation
checks them, and the tests hold both to it. docs/csv-schema.md renders these tables for humans.
"""

from __future__ import annotations

from dataclasses import dataclass

from distbench.choices import RANK_AGGS, STATUSES, TIMINGS


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype name
    doc: str


COMM_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks in the job"),
    Column("op", "string", "collective name from distbench.ops.OPS"),
    Column("dtype", "string", "element type (float32, bfloat16, ...)"),
    Column("nccl_env", "string", "label of the NCCL environment sweep point ('default' when none)"),
    Column("timing", "string", "events, graph or host (how elapsed time was taken: see below)"),
    Column("inplace", "bool", "True when the output buffer is the input buffer"),
    Column("size_bytes", "int64", "nccl-tests 'size': bytes of the largest buffer (total for gather/scatter/alltoall)"),
    Column("count", "int64", "elements in that buffer (size_bytes / element size)"),
    Column("trial", "int64", "trial index, 0-based; each trial times `iters` back-to-back ops"),
    Column("iters", "int64", "ops timed in this trial (graph: ops per graph x graph launches)"),
    Column("rank_agg", "string", "how `time_us` combines the ranks' times: max (default), avg, min or rank0"),
    Column("time_us", "float64", "time per op in microseconds: trial elapsed / iters on each rank, combined over ranks by `rank_agg`"),
    Column("time_us_rank_min", "float64", "the fastest rank's time per op in this trial"),
    Column("time_us_rank_max", "float64", "the slowest rank's time per op in this trial"),
    Column("slowest_rank", "Int64", "rank with the largest time in this trial"),
    Column("algbw_gbps", "float64", "size_bytes / time, in GB/s (1e9 B/s); empty for barrier"),
    Column("busbw_gbps", "float64", "algbw x the op's nccl-tests bus factor, in GB/s; empty for barrier"),
    Column("correct", "boolean", "output equal to the expected values on every rank, before warm-up and after the timed trials (empty if not applicable)"),
    Column("status", "string", "ok, oom, skipped, failed or wrong"),
    Column("message", "string", "why the status is not ok (empty when ok)"),
)

COMM_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_COLUMNS)

_RANK_KEYS = ("backend", "world_size", "op", "dtype", "nccl_env", "timing", "inplace", "size_bytes", "trial")
COMM_RANK_COLUMNS: tuple[Column, ...] = tuple(c for c in COMM_COLUMNS if c.name in _RANK_KEYS) + (
    Column("rank", "int64", "global rank"),
    Column("time_us", "float64", "this rank's time per op in this trial (its elapsed / iters)"),
)
COMM_RANK_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_RANK_COLUMNS)


class SchemaError(ValueError):
    pass


def check_comm_frame(df) -> None:
    """Raise SchemaError if a DataFrame does not follow the comm CSV contract."""
    missing = [c for c in COMM_COLUMN_NAMES if c not in df.columns]
    extra = [c for c in df.columns if c not in COMM_COLUMN_NAMES]
    if missing or extra:
        raise SchemaError(f"comm CSV columns differ from the contract: missing={missing} extra={extra}")
    bad_status = sorted(set(df["status"].dropna()) - set(STATUSES))
    if bad_status:
        raise SchemaError(f"unknown status values {bad_status}; allowed: {list(STATUSES)}")
    bad_timing = sorted(set(df["timing"].dropna()) - set(TIMINGS))
    if bad_timing:
        raise SchemaError(f"unknown timing values {bad_timing}; allowed: {list(TIMINGS)}")
    bad_agg = sorted(set(df["rank_agg"].dropna()) - set(RANK_AGGS))
    if bad_agg:
        raise SchemaError(f"unknown rank_agg values {bad_agg}; allowed: {list(RANK_AGGS)}")
    ok = df[df["status"] == "ok"]
    if ok["time_us"].isna().any() or (ok["time_us"] <= 0).any():
        raise SchemaError("rows with status ok must have a positive time_us")


def check_comm_ranks_frame(df) -> None:
    """Raise SchemaError if a DataFrame does not follow the per-rank CSV contract."""
    missing = [c for c in COMM_RANK_COLUMN_NAMES if c not in df.columns]
    extra = [c for c in df.columns if c not in COMM_RANK_COLUMN_NAMES]
    if missing or extra:
        raise SchemaError(f"comm_ranks CSV columns differ from the contract: missing={missing} extra={extra}")
    if df["time_us"].isna().any() or (df["time_us"] <= 0).any():
        raise SchemaError("per-rank rows must have a positive time_us")


def read_comm_ranks_csv(path):
    """Read a per-rank times CSV with the contract's dtypes (and check it)."""
    import pandas as pd

    dtypes = {c.name: c.dtype for c in COMM_RANK_COLUMNS if c.dtype not in ("bool", "boolean")}
    df = pd.read_csv(path, dtype=dtypes, keep_default_na=True)
    df["inplace"] = df["inplace"].map(to_bool).astype("boolean")
    check_comm_ranks_frame(df)
    return df


def read_comm_csv(path):
    """Read a comm CSV with the contract's dtypes (and check it)."""
    import pandas as pd

    dtypes = {c.name: c.dtype for c in COMM_COLUMNS if c.dtype not in ("bool", "boolean")}
    df = pd.read_csv(path, dtype=dtypes, keep_default_na=True)
    for col in ("inplace", "correct"):
        df[col] = df[col].map(to_bool).astype("boolean")
    df["message"] = df["message"].fillna("")
    check_comm_frame(df)
    return df


def to_bool(v):
    if isinstance(v, bool):
        return v
    if v is None or (isinstance(v, float) and v != v):
        return None
    s = str(v).strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    return None


def markdown_table(columns=COMM_COLUMNS) -> str:
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in columns]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
