"""The comm results as nccl-tests' `-J` output writes them (analysis: reads tables only).

Its field names: `results[]` with `size`, `count`, `type`, `redop`, `root`, `out_of_place` /
`in_place` objects of `time`, `alg_bw`, `bus_bw`, `nwrong`; `out_of_bounds`, `average_bus_bandwidth`;
one document per series (backend, world size, op, dtype, NCCL settings, timing), so tools written
for nccl-tests read ours. Where we know less than nccl-tests: `nwrong` is 0 when our exact check
passed and null otherwise (we record whether the output was right, not how many elements were
wrong); `time` is our median over trials of the per-op time (max over ranks by default), not
nccl-tests' average.

Given comm_ranks.csv, each result also has what nccl-tests writes with `-I 1` (per-iteration
timing), so its `tools/analyze_perf_json.py` (--straggler, --spikes, --nodes, --iter0) reads ours:
`out_of_place_per_iter` / `in_place_per_iter` objects of `skipped_iterations`, `min_us`, `max_us`,
`avg_us`, `p50_us`, `p95_us`, `p99_us`, `stdev_us`, `cv_pct`, `times_us` (per iteration, the max
over processes) and `per_process_max_times_us` (one list per process, written only for more than
one process, as nccl-tests does); the statistics as nccl-tests computes them (population stdev,
its percentile index). Given each job's placement.json, `config.devices` lists every rank with its
`hostname`, which `--nodes` groups by. One iteration here is NOT nccl-tests' iteration: theirs is
one op (or one `-a` group of ops, divided by their number; `-I` is refused with CUDA graphs),
ours is one timed trial, `iters` back-to-back ops (x graph launches under `graph` timing) whose
time per op is the trial's elapsed / iters on each rank, as comm_ranks.csv holds it. So
`times_us` has one entry per trial, a spike is a slow trial, and `--iter0` compares the first
trial (after our warm-up) with the rest. Each process is one rank (one GPU). Ours only:
`per_process_arrival_us` (when each rank was ready to start the trial, after the first one) and
`config.per_iter_unit`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary
from distbench.core.ops_spec import SPECS
from distbench.core.choices import NCCL_TESTS_TYPES
from distbench.core.io import atomic_write_text, json_safe
from distbench.core.readers import UnreadableFile, read_json, read_table, remake


def _file_safe(text: str) -> str:
    """A traffic spec as part of a file name: zipf:1.2 -> zipf1.2; file:dir/m.csv -> filem.csv."""
    if text.startswith("file:"):
        text = "file" + Path(text[5:]).name
    return "".join(c for c in text if c.isalnum() or c in ".-")


# comm_ranks.csv's keys of one series (it has no `nodes`: a job, and so its node count, is fixed by
# backend, dtype, world size and NCCL setting) and of one point within it
RANK_SERIES = ["backend", "world_size", "op", "traffic", "dtype", "nccl_env", "timing"]
PER_ITER_FIELDS = {False: "out_of_place_per_iter", True: "in_place_per_iter"}


@dataclass(frozen=True)
class JobKey:
    """One comm job (its directory comm/{backend}/{dtype}/ws{N}/{nccl_env}), which its placement.json belongs to."""

    backend: str
    dtype: str
    world_size: int
    nccl_env: str

    @classmethod
    def of(cls, wildcards: dict) -> "JobKey":
        return cls(str(wildcards["backend"]), str(wildcards["dtype"]), int(wildcards["world_size"]),
                   str(wildcards["nccl_env"]))


def _percentile_index(n: int, percentile: int) -> int:
    """nccl-tests' percentileIndex (src/util.cu)."""
    return min(n - 1, (n * percentile + 99) // 100 - 1)


def per_iter_block(rank_times: pd.DataFrame, arrivals: pd.DataFrame | None = None) -> dict | None:
    """nccl-tests' `*_per_iter` object from one point's times: rows = ranks, columns = trials (µs).
    Statistics over `times_us`, the max over ranks per trial, as nccl-tests' computeIterStats."""
    rank_times = rank_times.dropna(axis=1)  # a trial some rank lacks cannot be compared across ranks
    if rank_times.empty:
        return None
    times = [float(t) for t in rank_times.max(axis=0)]
    ordered, n = sorted(times), len(times)
    avg = sum(times) / n
    stdev = math.sqrt(sum((t - avg) ** 2 for t in times) / n)
    block = {"skipped_iterations": 0, "min_us": ordered[0], "max_us": ordered[-1], "avg_us": avg,
             "p50_us": ordered[n // 2], "p95_us": ordered[_percentile_index(n, 95)],
             "p99_us": ordered[_percentile_index(n, 99)], "stdev_us": stdev,
             "cv_pct": stdev / avg * 100 if avg > 0 else 0.0, "times_us": times}
    if len(rank_times) > 1:  # nccl-tests writes the process rows only for more than one process
        block["per_process_max_times_us"] = [[float(t) for t in row] for row in rank_times.to_numpy()]
        if arrivals is not None:
            arr = arrivals.reindex(index=rank_times.index, columns=rank_times.columns)
            if arr.notna().all().all():
                block["per_process_arrival_us"] = [[float(t) for t in row] for row in arr.to_numpy()]
    return block


def _rank_points(comm_ranks_csv) -> dict[tuple, tuple[pd.DataFrame, pd.DataFrame]]:
    """{(series..., size_bytes, inplace): (time_us, arrival_us) as ranks x trials} from comm_ranks.csv."""
    if not comm_ranks_csv or not Path(comm_ranks_csv).exists():
        return {}
    ranks = read_table(comm_ranks_csv, remake(comm_ranks_csv), missing_ok=True)  # the one reader
    if ranks is None or ranks.empty:
        return {}
    ranks["traffic"] = ranks["traffic"].fillna("none") if "traffic" in ranks else "none"
    if "arrival_us" not in ranks:
        ranks["arrival_us"] = float("nan")
    ranks["inplace"] = ranks["inplace"].astype(str).str.lower() == "true"
    ranks = ranks[ranks["time_us"].notna()]
    keys = [*RANK_SERIES, "size_bytes", "inplace"]
    # One reshape for the whole table, then a slice per point: a pivot_table per point took 11 s of
    # a 2-GPU default run's report (1,092 points). A trial some rank lacks is NaN (per_iter_block drops it).
    first = ranks.drop_duplicates([*keys, "rank", "trial"]).set_index([*keys, "rank", "trial"])
    times, arrivals = first["time_us"].unstack("trial"), first["arrival_us"].unstack("trial")
    out = {}
    for key, t in times.groupby(level=keys, sort=False):
        backend, ws, op, traffic, dtype, env, timing, size, inplace = key
        norm = (str(backend), int(ws), str(op), str(traffic), str(dtype), str(env), str(timing), int(size),
                bool(inplace))
        t = t.droplevel(keys).sort_index()
        out[norm] = (t, arrivals.loc[key])
    return out


def devices_of(placement_json) -> list[dict] | None:
    """nccl-tests' `config.devices` (rank, group, pid, hostname, device, device_hex, device_info) from
    a job's placement.json; None when it names no ranks (a job that never started)."""
    try:
        ranks = read_json(placement_json, remake(placement_json)).get("ranks") or []
    except UnreadableFile:
        return None
    if not ranks or not all(r.get("hostname") for r in ranks):
        return None
    return [{"rank": r["rank"], "group": 0, "pid": r.get("pid"), "hostname": r["hostname"],
             "device": r.get("device_index"), "device_hex": r.get("pci_bus_id") or "",
             "device_info": r.get("gpu_name") or r.get("device") or ""}
            for r in sorted(ranks, key=lambda r: r["rank"])]


def nccl_tests_documents(comm_summary_csv, comm_ranks_csv=None,
                         placements: dict[JobKey, str] | None = None) -> dict[str, dict]:
    """{file name: nccl-tests -J style document} per series of the comm summary (its path, or the table
    as read for summary.json: one read of comm_summary.csv); with comm_ranks.csv
    the `-I 1` per-iteration fields too, with placements ({job: its placement.json}) the hosts."""
    if isinstance(comm_summary_csv, pd.DataFrame) or comm_summary_csv is None:  # already read (summary.json's)
        comm = comm_summary_csv
    else:
        comm = read_table(comm_summary_csv, remake(comm_summary_csv), missing_ok=True)
    out: dict[str, dict] = {}
    if comm is None or comm.empty:
        return out
    comm = normalise_summary(comm)  # nodes 1 and traffic "none" where a tree predates them
    rank_points = _rank_points(comm_ranks_csv)
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
                rec[field] = {"time": json_safe(r["time_us_median"]), "alg_bw": json_safe(r["algbw_gbps_median"]),
                              "bus_bw": json_safe(r["busbw_gbps_median"]), "nwrong": 0 if ok else None}
                point = rank_points.get((str(backend), int(ws), str(op), str(traffic), str(dtype), str(env),
                                         str(timing), int(size), inplace))
                block = per_iter_block(*point) if point else None
                if block:
                    rec[PER_ITER_FIELDS[inplace]] = block
            trials = [len(rec[f]["times_us"]) for f in PER_ITER_FIELDS.values() if f in rec]
            if trials:  # nccl-tests' iterations per result: ours are trials
                rec["actual_iterations"] = max(trials)
            rec["experiment_name"] = f"distbench {op}"
            results.append(rec)
        bus = [x[f]["bus_bw"] for x in results for f in ("out_of_place", "in_place")
               if x.get(f) and x[f]["bus_bw"] is not None]
        wrong = sum(1 for x in results for f in ("out_of_place", "in_place") if x.get(f) and x[f]["nwrong"] is None)
        # the file name grows only where the series needs it (older names stay as they were)
        where = (f"_{int(nodes)}nodes" if nodes > 1 else "") + ("" if traffic == "none" else f"_{_file_safe(traffic)}")
        name = f"{backend}_{op}{where}_{dtype}_ws{int(ws)}_{env}_{timing}.json"
        config = {"ngpus": int(ws), "nnodes": int(nodes), "backend": backend, "nccl_env": env, "timing": timing,
                  **({} if traffic == "none" else {"traffic": traffic})}
        trials = [x["actual_iterations"] for x in results if "actual_iterations" in x]
        if trials:
            config.update(iterations=max(trials), per_iter_timing=True, per_iter_skip=0,
                          per_iter_unit="trial: `iters` back-to-back ops, time per op (not one op as in nccl-tests)")
        placement = (placements or {}).get(JobKey(str(backend), str(dtype), int(ws), str(env)))
        devices = devices_of(placement) if placement else None
        if devices:
            config["devices"] = devices
        out[name] = {
            "version": "distbench (nccl-tests -J field names)",
            "config": config,
            "results": results,
            "out_of_bounds": {"count": wrong, "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": sum(bus) / len(bus) if bus else None, "okay": "unchecked"},
        }
    return out


def placements_of(jobs: list[dict], paths: list) -> dict[JobKey, str]:
    """{job: its placement.json} from the comm jobs' wildcards and their placement files, in the same order."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    return {JobKey.of(w): str(p) for w, p in zip(jobs, paths, strict=True)}


def write_nccl_tests(comm_summary_csv, out_dir, comm_ranks_csv=None,
                     placements: dict[JobKey, str] | None = None) -> list[Path]:
    """Write one nccl-tests-style file per series into out_dir; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, d in nccl_tests_documents(comm_summary_csv, comm_ranks_csv, placements).items():
        atomic_write_text(out_dir / name, json.dumps(d, indent=1) + "\n")
        paths.append(out_dir / name)
    return paths
