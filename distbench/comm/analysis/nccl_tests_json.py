"""The comm results as nccl-tests' `-J` output writes them (analysis: reads tables only).

Its field names: `results[]` with `size`, `count`, `type`, `redop`, `root`, `out_of_place` /
`in_place` objects of `time`, `alg_bw`, `bus_bw`, `nwrong`; `out_of_bounds`, `average_bus_bandwidth`;
one document per series (backend, world size, op, dtype, NCCL settings, timing), so tools written
for nccl-tests read ours. Where we know less than nccl-tests: `nwrong` is 0 when our exact check
passed and null otherwise (we record whether the output was right, not how many elements were
wrong); `time` is our median over trials of the per-op time (max over ranks by default), not
nccl-tests' average.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary
from distbench.comm.spec import SPECS
from distbench.core.choices import NCCL_TESTS_TYPES
from distbench.core.io import atomic_write_text


def _clean(v):
    """JSON-safe: NaN/NA -> None, numpy scalars -> Python."""
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


def _file_safe(text: str) -> str:
    """A traffic spec as part of a file name: zipf:1.2 -> zipf1.2; file:dir/m.csv -> filem.csv."""
    if text.startswith("file:"):
        text = "file" + Path(text[5:]).name
    return "".join(c for c in text if c.isalnum() or c in ".-")


def nccl_tests_documents(comm_summary_csv) -> dict[str, dict]:
    """{file name: nccl-tests -J style document} per series of the comm summary."""
    comm = pd.read_csv(comm_summary_csv) if comm_summary_csv and Path(comm_summary_csv).exists() else None
    out: dict[str, dict] = {}
    if comm is None or comm.empty:
        return out
    comm = normalise_summary(comm)  # nodes 1 and traffic "none" where a tree predates them
    series = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing"]
    for key, g in comm.groupby(series, sort=True):
        backend, ws, nodes, op, traffic, dtype, env, timing = key
        results = []
        for size, pts in g.groupby("size_bytes", sort=True):
            elem = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int32": 4}[dtype]
            rec = {"size": int(size), "count": int(size) // elem, "type": NCCL_TESTS_TYPES[dtype],
                   "redop": SPECS[op].redop, "root": SPECS[op].root}
            for inplace, field in ((False, "out_of_place"), (True, "in_place")):
                p = pts[pts["inplace"].astype(str).str.lower() == str(inplace).lower()]
                if p.empty or p.iloc[0]["status"] != "ok":
                    rec[field] = None
                    continue
                r = p.iloc[0]
                ok = str(r["correct"]).lower() == "true"
                rec[field] = {"time": _clean(r["time_us_median"]), "alg_bw": _clean(r["algbw_gbps_median"]),
                              "bus_bw": _clean(r["busbw_gbps_median"]), "nwrong": 0 if ok else None}
            rec["experiment_name"] = f"distbench {op}"
            results.append(rec)
        bus = [x[f]["bus_bw"] for x in results for f in ("out_of_place", "in_place")
               if x.get(f) and x[f]["bus_bw"] is not None]
        wrong = sum(1 for x in results for f in ("out_of_place", "in_place") if x.get(f) and x[f]["nwrong"] is None)
        # the file name grows only where the series needs it (older names stay as they were)
        where = (f"_{int(nodes)}nodes" if nodes > 1 else "") + ("" if traffic == "none" else f"_{_file_safe(traffic)}")
        name = f"{backend}_{op}{where}_{dtype}_ws{int(ws)}_{env}_{timing}.json"
        out[name] = {
            "version": "distbench (nccl-tests -J field names)",
            "config": {"ngpus": int(ws), "nnodes": int(nodes), "backend": backend, "nccl_env": env, "timing": timing,
                       **({} if traffic == "none" else {"traffic": traffic})},
            "results": results,
            "out_of_bounds": {"count": wrong, "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": sum(bus) / len(bus) if bus else None, "okay": "unchecked"},
        }
    return out


def write_nccl_tests(comm_summary_csv, out_dir) -> list[Path]:
    """Write one nccl-tests-style file per series into out_dir; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, d in nccl_tests_documents(comm_summary_csv).items():
        atomic_write_text(out_dir / name, json.dumps(d, indent=1) + "\n")
        paths.append(out_dir / name)
    return paths
