"""A recorded job time as the estimate (distbench.pipeline.estimate) reads it: Snakemake's benchmark tsv,
read from a small regular file only (no symlink followed), and a value that is no job time left out.
Torch-free and pandas-free."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

# The bytes of one file (a benchmark tsv is a header and a line per repeat: about 100 bytes each; a
# job.json about 1.5 KiB).
MAX_FILE_BYTES = 64 * 1024
# A recorded job time beyond this is not a measurement of the job (a job's own limit is far below).
MAX_JOB_S = 7 * 24 * 3600.0


def job_seconds(value) -> float | None:
    """A recorded job time, when it is one: a finite number of seconds above 0 and below MAX_JOB_S."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and 0 < v < MAX_JOB_S else None


def read_small(path: Path) -> bytes | None:
    """A regular file's bytes, at most MAX_FILE_BYTES (None: not a regular file, larger, unreadable);
    a symlink is never followed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_FILE_BYTES + 1)
    return data if len(data) <= MAX_FILE_BYTES else None


def read_seconds(tsv: Path, ignored: list[str] | None = None) -> float | None:
    """The mean of a Snakemake benchmark tsv's `s` column (one row per repeat); None if unreadable.
    A value that is no job time (job_seconds) is left out and named in `ignored`."""
    data = read_small(tsv)
    if data is None:
        if ignored is not None and os.path.lexists(tsv):
            ignored.append(f"{tsv}: not a regular file of at most {MAX_FILE_BYTES // 1024} KiB")
        return None
    try:
        lines = data.decode(errors="replace").splitlines()
        col = lines[0].split("\t").index("s")
        raw = [line.split("\t")[col] for line in lines[1:] if line.strip()]
    except (ValueError, IndexError):
        return None
    values = [job_seconds(v) for v in raw]
    bad = [r for r, v in zip(raw, values) if v is None]
    if bad and ignored is not None:
        ignored.append(f"{tsv}: {', '.join(b[:24] for b in bad[:3])} s")
    good = [v for v in values if v is not None]
    return sum(good) / len(good) if good else None
