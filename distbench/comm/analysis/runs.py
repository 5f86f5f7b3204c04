"""Communication across several runs (the report's "Several runs side by side", seed 001): per op,
each run's bus bandwidth at its largest size side by side, and the per-op time ratios between this
run and each other one. Reads each run's tables/comm_summary.csv only.
Fragments: templates/communication_runs.*.j2."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary, primary_rows
from distbench.core.choices import backend_name
from distbench.core.section import AcrossRuns, Run, table
from distbench.core.units import human_bytes, human_time_us, sig3

TABLE = "comm_summary.csv"


def side_by_side(runs: Mapping[str, pd.DataFrame]) -> tuple[list[str], list[list]]:
    """Per op: each run's busbw (and time) at the largest size it measured ok, per backend at its
    largest world size (primary timing). runs: {label: its comm summary}."""
    cols, cells = [], {}
    for label, comm in runs.items():
        p = primary_rows(comm)
        for backend, g in p.groupby("backend", sort=True):
            ws = int(g["world_size"].max())
            cols.append((label, backend, ws))
            for op, o in g[g["world_size"] == ws].groupby("op", sort=False):
                best = o.sort_values("size_bytes").iloc[-1]
                bw = best["busbw_gbps_median"]
                cells[(op, label, backend, ws)] = (f"{sig3(bw)} GB/s" if pd.notna(bw) else human_time_us(best["time_us_median"])) \
                    + f" ({human_bytes(best['size_bytes'])})"
    ops = list(dict.fromkeys(op for op, *_ in cells))
    headers = ["op"] + [f"{label}: {backend_name(b)} ws{w}" for label, b, w in cols]
    return headers, [[op] + [cells.get((op, *c)) for c in cols] for op in ops]


def ratios(runs: Mapping[str, pd.DataFrame], a: str, b: str) -> tuple[list[str], list[list]]:
    """Per op and world size both runs measured: the largest common size, each run's fastest
    primary time there, and b's time / a's (below 1: b is faster)."""
    pa, pb = primary_rows(runs[a]), primary_rows(runs[b])
    headers = ["op", "ranks", "size", f"{a}", f"{b}", f"{b} / {a} time"]
    rows = []
    for op in dict.fromkeys(pa["op"]):
        for ws in sorted(set(pa.loc[pa["op"] == op, "world_size"]) & set(pb.loc[pb["op"] == op, "world_size"])):
            xa = pa[(pa["op"] == op) & (pa["world_size"] == ws)]
            xb = pb[(pb["op"] == op) & (pb["world_size"] == ws)]
            common = sorted(set(xa["size_bytes"]) & set(xb["size_bytes"]))
            if not common:
                continue
            size = common[-1]
            ra = xa[xa["size_bytes"] == size].sort_values("time_us_median").iloc[0]
            rb = xb[xb["size_bytes"] == size].sort_values("time_us_median").iloc[0]
            rows.append([op, int(ws), human_bytes(size),
                         f"{human_time_us(ra['time_us_median'])} ({backend_name(ra['backend'])})",
                         f"{human_time_us(rb['time_us_median'])} ({backend_name(rb['backend'])})",
                         f"{rb['time_us_median'] / ra['time_us_median']:.3g}x"])
    return headers, rows


def build(runs: Mapping[str, Run]) -> dict | None:
    """The comm tables of the runs that have one (this run first), compared with this run."""
    tables = {label: r.table(TABLE) for label, r in runs.items()}  # read through the one reader (Run.table)
    comm = {label: normalise_summary(t) for label, t in tables.items() if t is not None}
    if len(comm) < 2:
        return None
    first, *others = list(comm)
    return {"side_by_side": table(*side_by_side(comm)),
            # this run against each other one (with three hosts copied in, every pair with this run)
            "comparisons": [{"a": first, "b": b, "ratios": table(*ratios(comm, first, b))} for b in others]}


ACROSS_RUNS = AcrossRuns(TABLE, build, "communication_runs",
                         columns=("backend", "world_size", "op", "size_bytes", "status", "time_us_median",
                                  "busbw_gbps_median"),
                         numeric=("world_size", "size_bytes", "time_us_median", "busbw_gbps_median"))
