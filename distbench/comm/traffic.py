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
from dataclasses import dataclass
from pathlib import Path

from distbench.core.choices import TRAFFIC_KINDS

NONE = "none"  # the traffic column of ops that take no matrix


class TrafficError(ValueError):
    pass


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
        raise TrafficError(f"traffic {spec!r}: unknown pattern {kind!r}; allowed: uniform, zipf:S (S > 0), file:PATH")
    if kind == "uniform":
        if arg:
            raise TrafficError(f"traffic {spec!r}: uniform takes no argument")
        return Traffic("uniform")
    if kind == "zipf":
        try:
            s = float(arg)
        except ValueError:
            raise TrafficError(f"traffic {spec!r}: zipf needs a number, e.g. zipf:1.2") from None
        if not (s > 0 and math.isfinite(s)):
            raise TrafficError(f"traffic {spec!r}: the zipf exponent must be a positive number")
        return Traffic("zipf", exponent=s)
    if not arg:
        raise TrafficError(f"traffic {spec!r}: file needs a path, e.g. file:traffic/moe8.csv")
    return Traffic("file", path=arg)


def read_matrix(path: str | Path) -> list[list[float]]:
    """A square matrix of non-negative weights (CSV or whitespace-separated; '#' starts a comment)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TrafficError(f"traffic matrix {path}: cannot be read ({e.strerror or e})") from None
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        cells = next(csv.reader([line])) if "," in line else line.split()
        try:
            values = [float(c) for c in cells if c.strip()]
        except ValueError:
            raise TrafficError(f"traffic matrix {path}, line {lineno}: not all numbers: {line!r}") from None
        if any(v < 0 or not math.isfinite(v) for v in values):
            raise TrafficError(f"traffic matrix {path}, line {lineno}: weights must be finite and >= 0")
        rows.append(values)
    n = len(rows)
    if n == 0:
        raise TrafficError(f"traffic matrix {path}: no rows")
    bad = [i + 1 for i, r in enumerate(rows) if len(r) != n]
    if bad:
        raise TrafficError(f"traffic matrix {path}: {n} rows, so every row needs {n} weights; "
                           f"row(s) {bad} differ")
    if sum(map(sum, rows)) <= 0:
        raise TrafficError(f"traffic matrix {path}: every weight is 0")
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
        raise TrafficError(f"traffic matrix {traffic.path} is {len(m)}x{len(m)}; this job has {n} ranks")
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


def validate(specs: list[str]) -> list[str]:
    """Every problem of a config's traffic list, as messages (files read now, before any job runs)."""
    problems = []
    for spec in specs:
        try:
            t = parse_traffic(spec)
            if t.kind == "file":
                read_matrix(t.path)
        except TrafficError as e:
            problems.append(str(e))
    return problems
