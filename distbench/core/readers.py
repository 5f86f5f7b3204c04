"""The one reader of every file distbench reads back: CSV tables, JSON documents and text.

What it reads is a cached output (Snakemake keeps a file while it is newer than its inputs), a
baseline run named by `report.baseline`, or another host's run copied into results/; any of them may
be truncated, binary, hand-edited, of another shape, or not a file at all (a FIFO, a link to a
device). A table is held to its family's contract (distbench.core.contract.TableContract: the columns
its readers index, its measurements finite and above zero on ok rows), so that no reader meets a
KeyError or a figure it cannot rank or draw. Whatever is wrong becomes one UnreadableFile
(a distbench.core.contract.SchemaError) that names the file, what is wrong with it and the fix, so
that a workflow script ends with that message, never a traceback
(distbench.launch.in_rule.run_in_rule), and a report section can name the file and go on without
it. Only the errors of reading and parsing are caught: anything else is a bug and still raises.

The fix depends on where the file came from, so the caller says it: `remake(path)` for this run's
own outputs (delete it so that Snakemake makes it again), `BASELINE_FIX` for report.baseline,
`other_run_fix(dir)` for a run copied in. Job CSVs read against their contract add the contract's
checks on top (distbench.core.tables).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from distbench.core.contract import Positive, SchemaError, table_contract
from distbench.core.io import file_kind

# What pandas reads as a missing value (its default na_values, the ones a CSV of ours can hold)
MISSING = frozenset({"", "nan", "NaN", "NA", "N/A", "n/a", "null", "NULL", "None", "<NA>", "-nan", "-NaN"})
# The most a file read back may hold: a run's largest table (the raw rows of a long sweep) is a few MiB;
# beyond this it is not a file distbench wrote, and reading it whole would only exhaust memory
MAX_BYTES = 256 * 2**20
BASELINE_FIX = ("Fix config key report.baseline (it must name a run whose tables are whole), or put back a good copy "
                "of that run's file")


class UnreadableFile(SchemaError):
    """A file that cannot be read as what it should be. `path`, `problem` (what is wrong) and `fix`
    (what to do about it) are kept apart for a report to show; the message holds all three."""

    def __init__(self, path, problem: str, fix: str):
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{self.path} cannot be read: {problem}. {fix}")


def remake(path) -> str:
    """The fix for one of this run's own outputs: Snakemake makes a deleted output again."""
    return f"Delete it so that Snakemake makes it again, then rerun: rm {shlex.quote(str(path))}"


def other_run_fix(run_dir) -> str:
    """The fix for a file of another host's run copied into results/."""
    return (f"Copy that run's directory here again whole, or remove it to leave the run out: "
            f"rm -r {shlex.quote(str(run_dir))}")


def read_bytes(path, fix: str, limit: int | None = None) -> bytes:
    """A regular file's bytes. Anything else is refused before it is read: a FIFO would block the
    reader until something writes to it, a device such as /dev/zero would fill memory (a symlink is
    followed to what it names); so is a file of more than `limit` bytes (MAX_BYTES unless told). The
    kind is checked on the path, so that a device is never opened (opening some has effects), and
    again on the open file, which is what is read: the path may have been swapped in between (the
    open does not block on a FIFO)."""
    path, limit = Path(path), MAX_BYTES if limit is None else limit
    try:
        kind = file_kind(os.stat(path).st_mode)
        if kind is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                kind = file_kind(st.st_mode)
                if kind is None and st.st_size <= limit:
                    with os.fdopen(fd, "rb", closefd=False) as f:
                        data = f.read(limit + 1)  # the file may grow while it is read
                    if len(data) <= limit:
                        return data
            finally:
                os.close(fd)
    except OSError as e:  # missing, a dangling symlink, no permission
        raise UnreadableFile(path, e.strerror or type(e).__name__, fix) from None
    if kind is not None:
        raise UnreadableFile(path, f"it is {kind}, not a regular file: only a file's contents are read", fix)
    raise UnreadableFile(path, f"it holds more than {limit:,} bytes, far beyond any table or document of a run: "
                               "not a file distbench wrote", fix)


def read_text(path, fix: str) -> str:
    """The file's text (UTF-8); a missing, unreadable, binary or non-UTF-8 file, or one that is not a
    regular file or is too large (read_bytes), raises UnreadableFile."""
    path = Path(path)
    data = read_bytes(path, fix)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableFile(path, f"not UTF-8 text (byte {e.start} is {data[e.start:e.start + 1]!r}): a binary or "
                                   "corrupted file", fix) from None
    if "\x00" in text:
        raise UnreadableFile(path, f"holds a NUL byte at {text.index(chr(0))}: a binary or corrupted file", fix)
    return text


def read_json(path, fix: str, expect: type = dict):
    """A JSON document whose top level is an `expect` (a dict unless told)."""
    path = Path(path)
    text = read_text(path, fix)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        # the document stops before its end (a string, object or list left open): a file cut short
        ends_early = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        cut = " (it ends early: the file was truncated)" if ends_early else ""
        raise UnreadableFile(path, f"not valid JSON at line {e.lineno} column {e.colno}: {e.msg}{cut}", fix) from None
    except RecursionError:  # nesting deeper than the parser goes
        raise UnreadableFile(path, "JSON nested too deeply to read", fix) from None
    if not isinstance(data, expect):
        raise UnreadableFile(path, f"its JSON is {_json_type(data)} where {_json_type(expect())} was expected", fix)
    return data


def _json_type(v) -> str:
    """What a JSON value is, in words (a list where an object was expected)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number")


def csv_problem(text: str, header_problem: Callable[[list[str]], str | None] | None = None) -> str | None:
    """What makes `text` unreadable as a CSV, before pandas guesses around it: no text, a torn last
    row, whatever header_problem says of the header, a column named twice, rows with the wrong number
    of fields, invalid quoting. None when it is whole."""
    if not text.strip():
        return f"the file is empty ({len(text.encode())} bytes, not even a header)"
    if not text.endswith("\n"):
        return "it ends in the middle of a row (no newline after the last line): the file was truncated"
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
        problem = header_problem(header) if header_problem else None
        if problem:
            return problem
        # pandas renames a repeated name (x, x.1) and a reader would take the first column for the one
        # meant: refused, whichever of them holds the right figures
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            return f"its header names the column(s) {repeated} more than once (a pasted or hand-edited header)"
        for row in reader:
            if row and len(row) != len(header):
                return (f"line {reader.line_num} has {len(row)} fields where the header has {len(header)}"
                        " (a torn or hand-edited row)")
    except csv.Error as e:
        return f"not valid CSV at line {reader.line_num}: {e}"
    return None


def _present(cells) -> list[bool]:
    return [c not in MISSING for c in cells]


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def table_problem(raw, columns: Sequence[str] = (), numeric: Sequence[str] = (),
                  finite_when_ok: Sequence[str] = (), positive: Sequence[Positive] = ()) -> str | None:
    """What is wrong with a CSV read as text cells (`raw`: a DataFrame of strings, "" for empty):
    a column of `columns` missing, a cell of `numeric` (or of a `positive` column) that is not a
    number, a value of `finite_when_ok` that is infinite on a row whose status is ok (every row,
    without a status), or a `positive` measurement that is not a finite number above zero on such a
    row (empty or NaN where the row owes one: Positive's where_filled and except_where)."""
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        return f"it lacks the column(s) {missing}"
    ok = list(raw["status"] == "ok") if "status" in raw.columns else [True] * len(raw)
    measured = {p.column: p for p in positive if p.column in raw.columns}
    for col in dict.fromkeys([*numeric, *finite_when_ok, *measured]):
        if col not in raw.columns:
            continue
        owed = _owed(raw, measured[col]) if col in measured else None
        for i, (cell, present) in enumerate(zip(raw[col], _present(raw[col]))):
            where = f"column {col}, row {i + 1}"
            if not present:
                if owed is not None and ok[i] and owed[i]:
                    return (f"{where}: {'empty' if cell == '' else repr(cell)} on a row whose status is ok (the row "
                            "must hold a measurement: a finite number above zero)")
                continue
            x = _number(cell)
            if x is None:
                return f"{where}: {cell[:40]!r} is not a number"
            if col in measured and ok[i] and not (math.isfinite(x) and (x > 0 or x == 0 and not owed[i])):
                return (f"{where}: {cell} on a row whose status is ok (a measurement must be a finite number above "
                        "zero)")
            if col in finite_when_ok and ok[i] and not math.isfinite(x):
                return (f"{where}: {cell} on a row whose status is ok (a measurement must be a finite number)")
    return None


def _owed(raw, p: Positive) -> list[bool]:
    """Which rows owe a value of the measurement p (whatever their status)."""
    owed = [True] * len(raw)
    if p.where_filled:
        filled = _present(raw[p.where_filled]) if p.where_filled in raw.columns else [False] * len(raw)
        owed = [a and b for a, b in zip(owed, filled)]
    for col, values in p.except_where:
        if col in raw.columns:
            owed = [a and v not in values for a, v in zip(owed, raw[col])]
    return owed


def _rows(text: str) -> int:
    """How many rows below the header a whole CSV (csv_problem found nothing) holds."""
    return sum(1 for row in csv.reader(io.StringIO(text, newline="")) if row) - 1


def read_table(path, fix: str, *, columns: Sequence[str] = (), numeric: Sequence[str] = (),
               finite_when_ok: Sequence[str] = (), parse: Callable | None = None, missing_ok: bool = False,
               rows_because: str = "", table: str | None = None):
    """A CSV table, whole and of the expected shape (see csv_problem and table_problem), then read
    by `parse(path)` (pandas' read_csv of the text already read unless told: a family's own reader that
    types its columns). missing_ok: an absent file is None (the table was not made) instead of an
    error. A file that is there is never taken for one not made: a zero-byte file (no header) is
    refused like a torn one. rows_because: why this file must hold rows
    (distbench.core.manifest.rows_reason: its family ran); a header alone is then refused, with that
    reason. table: the table's name, whose contract (distbench.core.contract.TableContract: the
    columns its readers index, its measurements) the file is held to on top of `columns`; by default
    the file's own name (tables/<name>.csv is <name>), so every reader of a table, this
    run's, a baseline's or another host's, refuses the same damage."""
    import pandas as pd

    path = Path(path)
    if missing_ok and not path.exists():
        return None
    contract = table_contract(path.stem if table is None and path.suffix == ".csv" else table or "")
    if contract is not None:
        columns = list(dict.fromkeys([*contract.columns, *columns]))
    positive = contract.positives if contract is not None else ()
    text = read_text(path, fix)
    problem = csv_problem(text)
    if problem is None and rows_because and _rows(text) < 1:
        problem = f"it holds a header and no row, but {rows_because}: the file was cut short or overwritten"
    if problem is None:
        try:
            if columns or numeric or finite_when_ok or positive:  # the cells as written: `parse` may coerce text to NaN
                raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
                problem = table_problem(raw, columns, numeric, finite_when_ok, positive)
            if problem is None:
                # the text already read and checked, not the path again: it may have been swapped since
                if parse is None or parse is pd.read_csv:
                    return pd.read_csv(io.StringIO(text))
                return parse(path)
        except UnreadableFile:  # `parse` read another file that was bad: that file's message stands
            raise
        # a value the parser cannot type (ParserError, IntCastingNaNError and SchemaError are ValueErrors)
        except (ValueError, OverflowError) as e:
            problem = f"a value does not parse ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"
    raise UnreadableFile(path, problem, fix)
