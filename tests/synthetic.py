"""Synthetic comm_summary / comm_largest / env / plan sets for the plot and report tests.

Times follow a latency + size/bandwidth model, so ratios and curves look like real runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import SUMMARY_COLUMNS

SIZES = [8 * 8**k for k in range(10)]  # 8 B .. 1 GiB
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0, "barrier": None}
MODEL = {  # backend -> (latency µs, algorithm bandwidth GB/s at 2 ranks)
    "nccl": (12.0, 150.0),
    "gloo": (60.0, 3.0),
}
TIMING_EXTRA_US = {"events": 0.0, "graph": -4.0, "host": 9.0}  # graph saves launch cost, host adds sync


def summary_row(**kw) -> dict:
    """One summary row with sensible defaults; pass the fields a test cares about."""
    row = dict(backend="nccl", world_size=2, op="all_reduce", dtype="float32", nccl_env="default",
               timing="events", inplace=False, size_bytes=1 << 20, n_trials=5, time_us_median=100.0,
               busbw_gbps_median=None, correct=True, status="ok", message="")
    row.update(kw)
    t, size, n = row["time_us_median"], row["size_bytes"], row["world_size"]
    factor = BUS_FACTOR.get(row["op"], lambda n: 1.0)
    algbw = size / (t * 1e3) if t and size else None  # B/µs -> GB/s
    row.setdefault("time_us_p5", t * 0.97 if t else None)
    row.setdefault("time_us_p95", t * 1.05 if t else None)
    row.setdefault("time_us_min", t * 0.95 if t else None)
    row.setdefault("time_us_cv", 0.02 if t else None)
    row.setdefault("algbw_gbps_median", algbw if factor else None)
    if row["busbw_gbps_median"] is None and factor and algbw:
        row["busbw_gbps_median"] = algbw * factor(n)
    row.setdefault("busbw_gbps_max", row["busbw_gbps_median"] * 1.02 if row["busbw_gbps_median"] else None)
    return {c: row.get(c) for c in SUMMARY_COLUMNS}


def build_summary(timings=None, world_sizes=(2, 4), backends=("nccl", "gloo"),
                  dtypes=("float32",), nccl_envs=("default",), oom=True) -> pd.DataFrame:
    timings = timings or {"nccl": ("events", "graph", "host"), "gloo": ("host",)}
    rows = []
    for backend in backends:
        lat, bw = MODEL[backend]
        for ws in world_sizes:
            for op, factor in BUS_FACTOR.items():
                for timing in timings[backend]:
                    for dtype in dtypes:
                        for env in nccl_envs if backend == "nccl" else ("default",):
                            slow = (1.3 if env != "default" else 1.0) * (1.5 if dtype != "float32" else 1.0)
                            for size in [0] if op == "barrier" else SIZES:
                                t = (lat * (1 + 0.5 * (ws - 2)) + TIMING_EXTRA_US[timing] * (backend == "nccl")
                                     + slow * size / (bw * 1e3) * (factor(ws) if factor else 1))
                                status, msg = "ok", ""
                                if oom and (backend, op, ws, size) == ("nccl", "all_gather", 4, SIZES[-1]):
                                    status, msg, t = "oom", "CUDA out of memory. Tried to allocate 4.00 GiB", None
                                rows.append(summary_row(backend=backend, world_size=ws, op=op, dtype=dtype,
                                                        nccl_env=env, timing=timing, size_bytes=size,
                                                        time_us_median=t, status=status, message=msg))
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def largest_of(summary: pd.DataFrame) -> pd.DataFrame:
    keys = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace"]
    ok = summary[summary["status"] == "ok"].copy()
    ok["nodes"], ok["traffic"] = ok["nodes"].fillna(1), ok["traffic"].fillna("none")
    return ok.loc[ok.groupby(keys)["size_bytes"].idxmax()].reset_index(drop=True)


ENV = {
    "python": "3.11.9", "torch": "2.5.1+cu124", "cuda": "12.4", "nccl_version": "2.21.5",
    "gloo_available": True, "gpu_count": 2,
    "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-000{i}",
              "pci_bus_id": f"00000000:1{i}:00.0", "memory_total_mib": 81559} for i in range(2)],
    "driver": "550.54.15", "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_count": 224,
    "hostname": "node-01", "git_commit": "0123abc", "platform": "Linux-5.15-x86_64",
}
PLAN = {
    "backends_run": ["nccl", "gloo"], "world_sizes": {"nccl": [2, 4], "gloo": [2, 4]},
    "skipped": [{"what": "nccl world sizes [6, 8]", "why": "above gpus=4"},
                {"what": "backend mpi", "why": "not built into this torch"}],
    "gpus": 4, "gpus_source": "declared",
}
CONFIG = {"backends": ["nccl", "gloo"], "world_sizes": [2, 4, 6, 8], "ops": list(BUS_FACTOR),
          "sizes": {"min": "8B", "max": "1GiB"}, "trials": 5, "label": "<b>lab & co</b>"}
TOPO_RAW = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-55\nGPU1\tNV18\t X \t0-55"
EXTRA = {  # shaped like distbench.comm.analysis.advice / probes.topology / probes.nccl_log / peak output
    "advice": [{"severity": "warning", "text": "GPU 0 and 1 talk over PCIe, not NVLink",
                "evidence": {"path": "PHB", "busbw_gbps": 21.3}}],
    "peak": {"peak_gbps": 450.0, "link": "NVLink4 x18", "basis": "18 links × 25 GB/s", "kind": "nvlink"},
    "topology": {"available": True, "gpus": ["GPU0", "GPU1"], "matrix": {"GPU0": {"GPU1": "NV18"}},
                 "links": [{"a": "GPU0", "b": "GPU1", "type": "NV", "nvlinks": 18}], "raw": TOPO_RAW},
    "nccl": {"nccl_version": "2.21.5", "nranks": 2, "nnodes": 1, "transport_counts": {"P2P/CUMEM": 24},
             "rings": [[0, 1], [1, 0]], "tuning": [{"op": "AllReduce", "size_bytes": 8, "algo": "Ring"}]},
    "placement": [{"rank": 0, "hostname": "node-01", "device": "cuda:0"},
                  {"rank": 1, "hostname": "node-01", "device": "cuda:1"}],
}


def make_synthetic(tmp_dir, summary: pd.DataFrame | None = None) -> dict:
    """Write comm_summary.csv, comm_largest.csv and env.json under tmp_dir; return paths and dicts."""
    tmp = Path(tmp_dir)
    tmp.mkdir(parents=True, exist_ok=True)
    summary = build_summary() if summary is None else summary
    paths = {"summary_csv": tmp / "comm_summary.csv", "largest_csv": tmp / "comm_largest.csv",
             "env_json": tmp / "env.json"}
    summary.to_csv(paths["summary_csv"], index=False)
    largest_of(summary).to_csv(paths["largest_csv"], index=False)
    paths["env_json"].write_text(json.dumps(ENV))
    return {**paths, "summary": summary, "plan": json.loads(json.dumps(PLAN)),
            "config": json.loads(json.dumps(CONFIG)), "extra": json.loads(json.dumps(EXTRA))}


def render_synthetic_report(tmp_dir) -> dict:
    """make_synthetic + figures + both reports under tmp_dir; adds figures, out_md, out_html, findings."""
    from distbench.comm.analysis.findings import compute_findings
    from distbench.comm.analysis.plots import make_all
    from distbench.core.section import ReportInputs
    from distbench.report.render import render_report

    tmp = Path(tmp_dir)
    data = make_synthetic(tmp / "tables")
    figures = make_all(data["summary_csv"], tmp / "figures_comm")
    out_md, out_html = tmp / "report" / "report.md", tmp / "report" / "report.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, data["env_json"], figures, data["config"],
                               data["plan"], extra=data["extra"]),
                  out_md, out_html)
    findings = compute_findings(data["summary"], data["plan"], peak=data["extra"]["peak"])
    return dict(data, figures=figures, out_md=out_md, out_html=out_html, findings=findings)
