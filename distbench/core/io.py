"""Atomic writes: a reader (or a killed job) never sees half a file."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _umask_mode())  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_csv(path, df) -> None:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.6g"))


# --- CSVs written while a job runs ------------------------------------------------------------

def partial_path(out: Path) -> Path:
    """Where a CSV grows while its job runs; renamed to `out` only when the job completes."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def csv_value(v):
    """One CSV cell: empty for None/NaN, 6 significant digits for floats."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return f"{v:.6g}" if isinstance(v, float) else v


class PartialCsvs:
    """CSVs written row batch by row batch to `.partial` files and renamed on close, so a job cut
    short never leaves a file that looks complete. `targets`: (path, column names), in the order
    their batches are written; on close they are renamed in reverse, so the first target's
    presence means every file is complete."""

    def __init__(self, targets):
        import csv

        self.targets = [(Path(p), tuple(cols)) for p, cols in targets]
        self.files, self.writers = [], []
        for path, columns in self.targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = open(partial_path(path), "w", newline="")
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            f.flush()
            self.files.append(f)
            self.writers.append(w)

    def write(self, index: int, rows) -> None:
        for r in rows:
            self.writers[index].writerow({k: csv_value(v) for k, v in r.items()})
        self.files[index].flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        for path, _ in reversed(self.targets):
            os.replace(partial_path(path), path)


def read_partial_rows(path, columns) -> list[dict]:
    """Complete rows of a `.partial` CSV (a row torn by a kill is dropped)."""
    import csv

    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if None not in r.values() and len(r) == len(columns)]


def csv_text(rows, columns) -> str:
    import csv
    import io as _io

    buf = _io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns))
    w.writeheader()
    w.writerows([{k: csv_value(v) for k, v in r.items()} for r in rows])
    return buf.getvalue()


def json_safe(v):
    """A table cell as JSON can hold it: NaN/NA -> None, numpy scalars -> Python (summary.json, the
    nccl-tests documents)."""
    import math

    import pandas as pd

    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v.item() if hasattr(v, "item") else v


def file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words (None: a regular file), from its st_mode."""
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"
