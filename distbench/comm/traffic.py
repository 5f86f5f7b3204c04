"""Traffic matrices for all_to_all_v: who sends how much to whom (no torch: the config check uses it).

A traffic spec is one of
- `uniform`:       every rank sends the same amount to every rank (all_to_all's pattern);
- `zipf:S`:        MoE-style routing skew. Rank d hosts expert d, and every rank routes its tokens
                   to expert d with probability proportional to 1 / (d + 1)^S (Zipf's law with
                   exponent S > 0), so rank 0 receives the most and every sender's row is the same;
- `file:PATH`:     an n x n matrix of non-negative weights in a CSV or whitespace-separated text
                   file, row = sender, column = receiver (a world size other than n is skipped).

Whatever the pattern, the matrix is scaled so that the ranks send `n x count` elements in all,
i.e. `count` per rank on average: at a given size an all_to_all_v moves as many bytes as an
all_to_all of that size, and a uniform all_to_all_v is exactly an all_to_all. Element counts per
cell come from the largest-remainder method over the whole matrix, so they sum exactly.
The diagonal (what a rank keeps) is part of the buffers, as in all_to_all; it crosses no link,
so the per-rank loads below leave it out.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from distbench.core.choices import TRAFFIC_KINDS

NONE = "none"  # the traffic column of ops that take no matrix


class TrafficError(ValueError):
    pass


# zipf:S weighs rank d by (d + 1)^-S: at the largest world size (1,024 ranks) 1024^S stays a finite
# float (below 1.8e308) for S up to 102; beyond 100 rank 0 receives all but ~1e-300 of the traffic,
# the same measurement. zipf:1000 overflows on every rank.
MAX_ZIPF_EXPONENT = 100.0
# A matrix file's weights are relative: any range of them fits below this bound, and the sums the
# split takes (n x n weights, then weight x n x count elements) stay finite. 1e308 weights sum to
# infinity and the split to NaN.
MAX_WEIGHT = 1e15


@dataclass(frozen=True)
class Traffic:
    kind: str  # one of TRAFFIC_KINDS
    exponent: float = 0.0  # zipf
    path: str = ""  # file

    @property
    def label(self) -> str:
        if self.kind == "zipf":
            return f"zipf:{self.exponent:g}"
        if self.kind == "file":
            return f"file:{self.path}"
        return self.kind


def parse_traffic(spec: str) -> Traffic:
    """`uniform`, `zipf:S` or `file:PATH`; a TrafficError names what is wrong."""
    kind, _, arg = str(spec).partition(":")
    if kind not in TRAFFIC_KINDS:
        raise TrafficError(f"traffic {shown(repr(spec))}: unknown pattern {shown(repr(kind))}; allowed: uniform, zipf:S (S > 0), file:PATH")
    if kind == "uniform":
        if arg:
            raise TrafficError(f"traffic {shown(repr(spec))}: uniform takes no argument")
        return Traffic("uniform")
    if kind == "zipf":
        try:
            s = float(arg)
        except ValueError:
            raise TrafficError(f"traffic {shown(repr(spec))}: zipf needs a number, e.g. zipf:1.2") from None
        if not (s > 0 and math.isfinite(s)):
            raise TrafficError(f"traffic {shown(repr(spec))}: the zipf exponent must be a positive number")
        if s > MAX_ZIPF_EXPONENT:
            raise TrafficError(f"traffic {shown(repr(spec))}: the zipf exponent must be at most {MAX_ZIPF_EXPONENT:g} "
                               "(beyond it rank 0 receives all the traffic already, and the weights overflow)")
        return Traffic("zipf", exponent=s)
    if not arg:
        raise TrafficError(f"traffic {shown(repr(spec))}: file needs a path, e.g. file:traffic/moe8.csv")
    return Traffic("file", path=arg)


# A matrix file is read whole at config check time and in every job: 1 MiB holds a 1,024 x 1,024
# matrix of short weights ('0.5,'), the largest world size the config allows. A larger file (or
# /dev/zero) is refused before it is read, and no more than this is ever read.
MAX_MATRIX_BYTES = 2**20
_SHOWN = 120  # characters of a path (user input) an error message shows


def shown(text: str) -> str:
    """User input in a message, cut short: a message stays short whatever the config holds."""
    text = str(text)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text):,} characters)"


def _read_text(path: Path) -> str:
    """The file's text, read only when it is a regular file of at most MAX_MATRIX_BYTES (never more)."""
    where = f"traffic matrix {shown(path)}"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a named pipe" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a plain file")
            raise TrafficError(f"{where}: is {kind}; give a regular file")
        if st.st_size > MAX_MATRIX_BYTES:
            raise TrafficError(f"{where}: {st.st_size:,} bytes; at most {MAX_MATRIX_BYTES:,} (1 MiB) are read")
        # O_NONBLOCK: should the path have become a pipe since the stat, opening it does not wait
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TrafficError(f"{where}: is not a regular file; give a regular file")
            data = f.read(MAX_MATRIX_BYTES + 1)
    except OSError as e:
        raise TrafficError(f"{where}: cannot be read ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_MATRIX_BYTES:
        raise TrafficError(f"{where}: more than {MAX_MATRIX_BYTES:,} bytes (1 MiB); at most that many are read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TrafficError(f"{where}: not text (byte {e.start + 1} is not UTF-8)") from None


def _rows_said(rows: list[int]) -> str:
    """'2, 3 and 5', or the first five and how many more: a ragged 20,000-row file gives one line."""
    head = ", ".join(map(str, rows[:5]))
    return f"[{head}]" if len(rows) <= 5 else f"[{head}] and {len(rows) - 5:,} more"


def read_matrix(path: str | Path) -> list[list[float]]:
    """A square matrix of non-negative weights (CSV or whitespace-separated; '#' starts a comment).
    Errors give a position and a reason, never the file's content (it may be any file)."""
    path = Path(path)
    text = _read_text(path)
    where = f"traffic matrix {shown(path)}"
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        cells = [c for c in (next(csv.reader([line])) if "," in line else line.split()) if c.strip()]
        values = []
        for field, c in enumerate(cells, 1):
            try:
                values.append(float(c))
            except ValueError:
                raise TrafficError(f"{where}, line {lineno}: not all numbers (field {field})") from None
        if any(not 0 <= v <= MAX_WEIGHT for v in values):  # NaN fails both comparisons
            raise TrafficError(f"{where}, line {lineno}: weights must be >= 0 and at most {MAX_WEIGHT:g} "
                               "(they are relative: scale them down)")
        rows.append(values)
    n = len(rows)
    if n == 0:
        raise TrafficError(f"{where}: no rows")
    bad = [i + 1 for i, r in enumerate(rows) if len(r) != n]
    if bad:
        raise TrafficError(f"{where}: {n} rows, so every row needs {n} weights; row(s) {_rows_said(bad)} differ")
    if sum(map(sum, rows)) <= 0:
        raise TrafficError(f"{where}: every weight is 0")
    return rows


def weights(traffic: Traffic, n: int) -> list[list[float]]:
    """The n x n weight matrix (row = sender); a TrafficError when a file is for another size."""
    if traffic.kind == "uniform":
        return [[1.0] * n for _ in range(n)]
    if traffic.kind == "zipf":
        p = [1.0 / (d + 1) ** traffic.exponent for d in range(n)]
        return [list(p) for _ in range(n)]
    m = read_matrix(traffic.path)
    if len(m) != n:
        raise TrafficError(f"traffic matrix {shown(traffic.path)} is {len(m)}x{len(m)}; this job has {n} ranks")
    return m


def split_counts(traffic: Traffic, n: int, count: int) -> list[list[int]]:
    """Elements each rank sends to each rank: n x count in all, shared in proportion to the weights
    (largest remainder, ties to the lower index, so every rank computes the same matrix)."""
    return [list(row) for row in _split_counts(traffic, n, count)]


@functools.lru_cache(maxsize=64)
def _split_counts(traffic: Traffic, n: int, count: int) -> tuple[tuple[int, ...], ...]:
    """split_counts, cached: every buffer set of a point asks again, and a matrix file is then read
    once per job rather than once per set."""
    w = weights(traffic, n)
    total = sum(map(sum, w))
    quota = [[x * n * count / total for x in row] for row in w]
    cells = [[math.floor(q) for q in row] for row in quota]
    left = n * count - sum(map(sum, cells))
    order = sorted(((quota[s][d] - cells[s][d], -(s * n + d)) for s in range(n) for d in range(n)), reverse=True)
    for _, neg in order[:left]:
        s, d = divmod(-neg, n)
        cells[s][d] += 1
    return tuple(tuple(row) for row in cells)


@dataclass(frozen=True)
class Load:
    rank: int  # the busiest rank
    elements: int  # what it sends or receives to / from other ranks, whichever is larger


def busiest(counts) -> Load:
    """The rank that moves the most over its links (off-diagonal sends or receives)."""
    n = len(counts)
    loads = [max(sum(counts[r][d] for d in range(n) if d != r), sum(counts[s][r] for s in range(n) if s != r))
             for r in range(n)]
    rank = max(range(n), key=loads.__getitem__)
    return Load(rank, loads[rank])


def same_matrix(t: Traffic):
    """What makes two specs one matrix: zipf's exponent as a number (zipf:1 is zipf:1.0), a file's real
    path (file:m.csv is file:./m.csv, or a link to it)."""
    if t.kind == "file":
        return "file", os.path.realpath(t.path)
    return t.kind, t.exponent


def validate(specs: list[str]) -> list[str]:
    """Every problem of a config's traffic list, as messages (files read now, before any job runs),
    and every entry that spells a matrix listed before it again: the schema's uniqueItems compares the
    text, and each entry is a sweep of its own, so zipf:1 beside zipf:1.0 measured one matrix twice,
    as two series."""
    problems, seen = [], {}
    for i, spec in enumerate(specs):
        try:
            t = parse_traffic(spec)
            if t.kind == "file":
                read_matrix(t.path)
        except TrafficError as e:
            problems.append(str(e))
            continue
        first = seen.setdefault(same_matrix(t), i)
        if first != i:
            problems.append(f"entries {first} ({shown(repr(specs[first]))}) and {i} ({shown(repr(spec))}) are one "
                            f"matrix ({shown(t.label)}): it would be measured twice, as two series; give it once")
    return problems
