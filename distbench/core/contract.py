"""The CSV contract machinery every benchmark family uses: a `Column` (name, pandas dtype, meaning), a
`Contract` (a family's job CSV: its columns, allowed values, the column that must be positive on ok
rows), `check_frame` / `read_csv` to hold a DataFrame or a CSV to one, the status/message columns every
family's CSV ends with, and a `TableContract` (a table of tables/: the columns its readers index and
its measurements, registered by each family's contract module: table_contract). Each family writes
its own contracts (its contract.py). docs/csv-schema.md renders them for humans (`markdown_table`;
tests/core/test_schema.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype name
    doc: str


# The outcome columns every family's CSV ends with.
STATUS_COLUMN = Column("status", "string", "ok, oom, skipped (not applicable, by design), not_run (not reached: the job ended early), failed, hung (the job outlived its limit with its ranks no longer progressing; the rank that stopped is named), timeout (the job outlived its limit while still progressing: slow, not hung) or wrong")
MESSAGE_COLUMN = Column("message", "string", "why the status is not ok (empty when ok)")


@dataclass(frozen=True)
class SameAs:
    """A `filled_when_missing` value that is not one constant: each row's value of another column
    (a requested size added after the measured one: a row written before it kept only the measured
    size, the best the row can say)."""
    column: str


class SchemaError(ValueError):
    pass


@dataclass(frozen=True)
class Contract:
    """One family's CSV: its columns, the allowed values of its categorical columns, and the column
    that must be positive on `ok` rows."""
    name: str
    columns: tuple[Column, ...]
    allowed: tuple[tuple[str, tuple], ...] = ()
    positive_when_ok: str | None = None
    # Columns added after CSVs were first written, with the value older files mean: a results
    # tree from before multi-node support is all one-node jobs. The value is a constant, or
    # SameAs(column) for the row's value of another column.
    filled_when_missing: tuple[tuple[str, object], ...] = ()
    job_rule: str = ""  # the Snakemake rule whose output such a CSV is (named when one cannot be read)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class Positive:
    """A measurement of a table that must be a finite number above zero on every row whose status is
    ok: a NaN, an infinity, a zero or a negative figure there is a damaged file, never a result (0
    tokens/s would rank last yet read as level; inf cannot be drawn). Some rows hold none by design:
    `where_filled` names a column without which the row owes no value (tokens/s: the language models,
    the rows with a seq_len), `except_where` ((column, values as written), ...) the rows that owe none
    (the barrier moves no bytes, so has no bandwidth). A value that is there is held to it on every ok
    row, save a zero where the row owes none (one rank's bus bandwidth is 0 by definition)."""
    column: str
    where_filled: str = ""
    except_where: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class TableContract:
    """A table of tables/ (results/<label>/tables/<name>.csv) as its readers take it: `columns`, every
    column one of them (the report, summary.json, the plots, the prediction) indexes without asking
    whether it is there, and `positive`, its measurements (a column name, or a Positive to say which
    rows owe one). distbench.core.readers.read_table holds a file of that name to it, so a reader never
    meets a missing column (a KeyError) or a figure it cannot rank or draw."""
    name: str
    columns: tuple[str, ...]
    positive: tuple[str | Positive, ...] = ()

    @property
    def positives(self) -> tuple[Positive, ...]:
        return tuple(p if isinstance(p, Positive) else Positive(p) for p in self.positive)


# Every family's table contracts by name, filled as each family's contract module is imported (its
# TABLES = register_tables(...)); its manifest imports it, so the registry is whole wherever the
# manifests are (distbench.pipeline.families), as for distbench.core.manifest.REGISTRY.
TABLE_CONTRACTS: dict[str, TableContract] = {}


def register_tables(*contracts: TableContract) -> tuple[TableContract, ...]:
    """Add a family's table contracts to the registry; a name given a second, different contract is
    refused."""
    for t in contracts:
        if TABLE_CONTRACTS.get(t.name, t) != t:
            raise ValueError(f"table {t.name!r} is given two different contracts")
        TABLE_CONTRACTS[t.name] = t
    return contracts


def table_contract(name: str) -> TableContract | None:
    """The contract of table `name` (None: no registered family declares one)."""
    return TABLE_CONTRACTS.get(name)


def check_frame(contract: Contract, df) -> None:
    """Raise SchemaError if a DataFrame does not follow the contract."""
    fillable = {name for name, _ in contract.filled_when_missing}
    missing = [c for c in contract.names if c not in df.columns and c not in fillable]
    extra = [c for c in df.columns if c not in contract.names]
    if missing or extra:
        raise SchemaError(f"{contract.name} CSV columns differ from the contract: missing={missing} extra={extra}")
    for col, allowed in contract.allowed:
        bad = sorted(set(df[col].dropna()) - set(allowed))
        if bad:
            raise SchemaError(f"unknown {col} values {bad} in {contract.name}; allowed: {list(allowed)}")
    col = contract.positive_when_ok
    import numpy as np

    ok = (df["status"] == "ok").fillna(False).to_numpy(bool) if "status" in df else np.ones(len(df), bool)
    rows = df[ok]
    if col and (rows[col].isna().any() or (rows[col] <= 0).any()):
        first = _first_row(ok & (df[col].isna() | (df[col] <= 0)).fillna(True).to_numpy(bool))
        raise SchemaError(f"{contract.name}: rows with status ok must have a positive {col} "
                          f"(row {first}: {df[col].iloc[first - 1]})")
    # A measurement is a finite number: an infinite one (a hand edit, a division by a zero time) would
    # pass every check above and be printed as "inf s" or drawn off the axis. Only rows that say ok:
    # a table without a status (the health check's counters) has no measurements to hold to it.
    for c in contract.columns if "status" in df else ():
        if c.dtype.startswith("float") and c.name in df:
            bad = ok & df[c.name].isin([float("inf"), float("-inf")]).to_numpy(bool)
            if bad.any():
                first = _first_row(bad)
                raise SchemaError(f"{contract.name}: column {c.name}, row {first}: {df[c.name].iloc[first - 1]} on a "
                                  "row whose status is ok (a measurement must be a finite number)")


def _first_row(mask) -> int:
    """The 1-based data row (the CSV's line less its header) of the first True in mask."""
    import numpy as np

    return int(np.flatnonzero(mask)[0]) + 1


def read_csv(contract: Contract, path):
    """Read one of the contract's CSVs with its dtypes (and check it)."""
    import pandas as pd

    dtypes = {c.name: c.dtype for c in contract.columns if c.dtype not in ("bool", "boolean")}
    df = pd.read_csv(path, dtype=dtypes, keep_default_na=True)
    dtype_of = {c.name: c.dtype for c in contract.columns}
    for name, value in contract.filled_when_missing:
        if name not in df.columns:
            filled = (df[value.column].astype(dtype_of[name]) if isinstance(value, SameAs)
                      else pd.Series(value, index=df.index, dtype=dtype_of[name]))
            df.insert(min(contract.names.index(name), len(df.columns)), name, filled)
    for c in contract.columns:
        if c.dtype in ("bool", "boolean"):
            df[c.name] = df[c.name].map(to_bool).astype("boolean")
    if "message" in df:
        df["message"] = df["message"].fillna("")
    check_frame(contract, df)
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


def markdown_table(columns) -> str:
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in columns]
    return "\n".join(lines)


def print_tables(*contracts: Contract) -> None:
    """docs/csv-schema.md's tables (each family's `python -m distbench.<family>.contract`)."""
    for contract in contracts:
        print(f"## {contract.name}\n\n{markdown_table(contract.columns)}\n")
