"""Machine-readable results, from the aggregated tables (analysis: reads tables only).

- `summary_document`: one JSON document in the shape seed 000 promises (`name`, `world_size`,
  `timestamp`, `config` with warm-up, iterations and device, `results.communication.<op>`,
  `results.training`, `results.memory`); its JSON Schema is distbench/report/summary.schema.json.
- `nccl_tests_documents`: the comm results as nccl-tests' `-J` output writes them (its field names:
  `results[]` with `size`, `count`, `type`, `redop`, `root`, `out_of_place` / `in_place` objects of
  `time`, `alg_bw`, `bus_bw`, `nwrong`; `out_of_bounds`, `average_bus_bandwidth`), one document per
  series (backend, world size, op, dtype, NCCL settings, timing), so tools written for nccl-tests
  read ours. Where we know less than nccl-tests: `nwrong` is 0 when our exact check passed and null
  otherwise (we record whether the output was right, not how many elements were wrong); `time` is
  our median over trials of the per-op time (max over ranks by default), not nccl-tests' average.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary

from distbench.comm.spec import SPECS
from distbench.core.choices import NCCL_TESTS_TYPES

SCHEMA_PATH = Path(__file__).with_name("summary.schema.json")


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


def _records(df: pd.DataFrame, columns) -> list[dict]:
    cols = [c for c in columns if c in df.columns]
    return [{c: _clean(r[c]) for c in cols} for _, r in df[cols].iterrows()]


COMM_FIELDS = ("backend", "world_size", "nodes", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
               "time_us_median", "time_us_p5", "time_us_p95", "algbw_gbps_median", "busbw_gbps_median", "busiest_rank",
               "busiest_rank_bytes", "busiest_rank_time_us_median", "correct", "status")
TRAINING_FIELDS = ("model", "strategy", "config", "backend", "world_size", "batch_size", "dtype", "step_time_ms_median",
                   "compute_only_ms_median", "exposed_comm_ms", "overlap_fraction", "samples_per_s_median",
                   "tokens_per_s_median", "tflops_per_device", "mfu", "efficiency_vs_plain_1gpu", "status")
MEMORY_FIELDS = ("model", "config", "backend", "world_size", "largest_measured_batch", "params_bytes", "grads_bytes",
                 "optimizer_bytes", "activations_bytes", "activation_bytes_per_sample", "peak_allocated_bytes",
                 "estimate_error_bytes", "largest_batch_fits", "status")


def _read(path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path and Path(path).exists() else None


def summary_document(comm_summary_csv, env_json, config: dict, training_summary_csv=None, memory_summary_csv=None,
                     name: str | None = None) -> dict:
    comm = _read(comm_summary_csv)
    env = json.loads(Path(env_json).read_text()) if env_json and Path(env_json).exists() else {}
    training, memory = _read(training_summary_csv), _read(memory_summary_csv)
    sizes = [int(w) for df in (comm, training, memory) if df is not None and len(df) for w in df["world_size"]]
    world = max(sizes) if sizes else 0
    gpus = env.get("gpus") or []
    device = (gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None) or ("cpu" if not env.get("cuda_available") else "gpu")
    ran_nccl = comm is not None and (comm["backend"] == "nccl").any()
    timing = config["comm"] if ran_nccl or comm is None else config["comm"]["gloo"]
    communication: dict[str, list] = {}
    if comm is not None:
        for op, g in comm.groupby("op", sort=True):
            communication[str(op)] = _records(g.sort_values(["backend", "world_size", "dtype", "timing", "size_bytes"]),
                                              COMM_FIELDS)
    return {
        "name": name or f"distbench_{world}{'gpu' if device != 'cpu' else 'rank'}",
        "world_size": world,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # the comm jobs' settings: NCCL's where NCCL ran, else the Gloo ones (comm.gloo)
        "config": {"warmup_iters": timing["warmup"], "benchmark_iters": timing["iters"],
                   "trials": timing["trials"], "device": device, "backends": list(config["backends"]),
                   "torch": env.get("torch"), "nccl_version": env.get("nccl_version"), "git_commit": env.get("git_commit")},
        "results": {
            "communication": communication,
            "training": _records(training, TRAINING_FIELDS) if training is not None else [],
            "memory": _records(memory, MEMORY_FIELDS) if memory is not None else [],
        },
    }


def _file_safe(text: str) -> str:
    """A traffic spec as part of a file name: zipf:1.2 -> zipf1.2; file:dir/m.csv -> filem.csv."""
    if text.startswith("file:"):
        text = "file" + Path(text[5:]).name
    return "".join(c for c in text if c.isalnum() or c in ".-")


def nccl_tests_documents(comm_summary_csv) -> dict[str, dict]:
    """{file name: nccl-tests -J style document} per series of the comm summary."""
    comm = _read(comm_summary_csv)
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


def write_json_outputs(comm_summary_csv, env_json, config, out_summary, out_nccl_dir, training_summary_csv=None,
                       memory_summary_csv=None) -> list[Path]:
    """Write summary.json (checked against its schema) and the nccl-tests-style files."""
    from distbench.core.io import atomic_write_text

    doc = summary_document(comm_summary_csv, env_json, config, training_summary_csv, memory_summary_csv)
    validate_summary(doc)
    atomic_write_text(out_summary, json.dumps(doc, indent=1) + "\n")
    out_dir = Path(out_nccl_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [Path(out_summary)]
    for name, d in nccl_tests_documents(comm_summary_csv).items():
        atomic_write_text(out_dir / name, json.dumps(d, indent=1) + "\n")
        paths.append(out_dir / name)
    return paths


def validate_summary(doc: dict) -> None:
    import jsonschema

    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
