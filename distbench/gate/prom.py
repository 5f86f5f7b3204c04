"""A node_exporter textfile-collector file, `distbench.prom`, written atomically (a temporary file in
the same directory, then renamed: the collector never reads half a file), in Prometheus' text
exposition format, metric names with their units:

  distbench_gate_status{node}                       0 pass, 1 warn, 2 fail (the gate's verdict)
  distbench_health_item_ok{node,gpu,item}           1 ok, 0 degraded or failing (not-available items left out)
  distbench_comm_busbw_gbps{node,node_type,op,size_bytes,backend,world_size,timing}   median bus bandwidth, GB/s
  distbench_comm_latency_us{node,node_type,op,size_bytes,backend,world_size,timing}   median time per op, µs
                                                    (node_type: '4x NVIDIA H200', the fleet a node is
                                                    compared within; 'cpu' without GPUs)
  distbench_training_step_time_ms{node,model,strategy,config,backend,world_size}   median step time (full runs)
  distbench_training_mfu{node,model,strategy,config,backend,world_size}     model FLOPs utilisation, 0-1
  distbench_run_timestamp_seconds{node,source}      when this was written (Unix time)

The gate writes the gate, health and comm metrics; a full run (config `prometheus_dir`) writes health,
comm and training from its tables, and the gate's verdict from health/gate.csv: only the tables this
Snakemake invocation wrote (their mtime not before its process started, process_started_at), so an
earlier run's figures, or an old gate FAIL, are never republished under a fresh timestamp. When it wrote
none of the run's tables (a rerun with nothing to do, or `snakemake gate` alone, whose gate already
wrote the file) the file is left as it is. Torch-free.
"""

from __future__ import annotations

import time
from pathlib import Path

from distbench.core.io import atomic_write_text

FILE = "distbench.prom"
STATUS = {"PASS": 0, "WARN": 1, "FAIL": 2}
HELP = {
    "distbench_gate_status": "distbench gate verdict of the node: 0 pass, 1 warn, 2 fail",
    "distbench_health_item_ok": "distbench health item: 1 ok, 0 degraded or failing",
    "distbench_comm_busbw_gbps": "collective bus bandwidth (nccl-tests busbw), GB/s, median over trials",
    "distbench_comm_latency_us": "collective time per op, microseconds, median over trials",
    "distbench_training_step_time_ms": "training step time, milliseconds, median",
    "distbench_training_mfu": "training model FLOPs utilisation, fraction of the device peak",
    "distbench_run_timestamp_seconds": "when distbench wrote these metrics, Unix time",
}


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}" if labels else ""


def render(samples: list[tuple[str, dict, float]]) -> str:
    """The exposition text of (metric, labels, value) samples, grouped by metric with HELP and TYPE."""
    out, seen = [], set()
    for name in dict.fromkeys(s[0] for s in samples):
        out += [f"# HELP {name} {HELP[name]}", f"# TYPE {name} gauge"]
        for metric, labels, value in samples:
            key = (metric, _labels(labels))
            if metric != name or key in seen or value is None or value != value:
                continue  # a series once (the first: the default settings'), and no NaN
            seen.add(key)
            out.append(f"{name}{key[1]} {float(value):.10g}")
    return "\n".join(out) + "\n"


def write(directory, samples: list[tuple[str, dict, float]]) -> Path:
    path = Path(directory) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render(samples))
    return path


def health_samples(node: str, rows) -> list[tuple[str, dict, float]]:
    """`rows`: HealthRow-like (gpu, item, state); a not-available item is no sample."""
    return [("distbench_health_item_ok", {"node": node, "gpu": r.gpu, "item": r.item}, 1.0 if r.state == "ok" else 0.0)
            for r in rows if r.state in ("ok", "degraded", "failing")]


def node_type(gpu_name: str | None, gpus: int) -> str:
    """The fleet a node is compared within (the alert rules' DistbenchBusbwBelowFleet groups by it):
    '4x NVIDIA H200', or 'cpu' on a host without GPUs."""
    return f"{int(gpus)}x {gpu_name}" if gpu_name and gpus else "cpu"


def comm_sample(node: str, op: str, size_bytes: int, backend: str, world_size: int, timing: str,
                busbw_gbps: float | None, time_us: float | None, node_type: str) -> list[tuple[str, dict, float]]:
    labels = {"node": node, "node_type": node_type, "op": op, "size_bytes": str(int(size_bytes)), "backend": backend,
              "world_size": str(int(world_size)), "timing": timing}
    out = []
    if busbw_gbps is not None and busbw_gbps == busbw_gbps and size_bytes > 8:
        out.append(("distbench_comm_busbw_gbps", labels, busbw_gbps))
    if time_us is not None and time_us == time_us:
        out.append(("distbench_comm_latency_us", labels, time_us))
    return out


def timestamp(node: str, source: str) -> tuple[str, dict, float]:
    return ("distbench_run_timestamp_seconds", {"node": node, "source": source}, time.time())


def process_started_at(pid: int | None = None) -> float | None:
    """When process `pid` (this one) started, Unix time, from /proc (its start in clock ticks since
    boot, and the boot time, whole seconds: so up to 1 s early), or None where /proc cannot say."""
    import os

    from distbench.launch.invocation import process_start

    ticks = process_start(os.getpid() if pid is None else pid)
    try:
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                     if ln.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return None if ticks is None else btime + int(ticks) / os.sysconf("SC_CLK_TCK")


def _fresh(path: Path, since: float | None) -> bool:
    """`path` exists and, when `since` is given, was written since then (by this invocation)."""
    try:
        return path.stat().st_mtime >= since if since is not None else path.is_file()
    except OSError:
        return False


def _run_node_type(root: Path) -> str:
    """A full run's node type from its probe (probe/env.json: the GPUs torch saw)."""
    import json

    try:
        gpus = json.loads((root / "probe" / "env.json").read_text()).get("gpus") or []
    except (OSError, ValueError, AttributeError):
        gpus = []
    names = [g.get("name") for g in gpus if isinstance(g, dict) and g.get("name")]
    return node_type(names[0] if names else None, len(gpus))


RUN_TABLES = ("health/health_before.csv", "tables/comm_summary.csv", "tables/training_summary.csv")


def run_samples(results_dir, node: str, since: float | None = None) -> list[tuple[str, dict, float]]:
    """A full run's metrics from its tables (results/<label>/): health before the benchmarks, the comm
    summary's ok rows, the training summary, the gate's verdict. Tables a run did not make, or (with
    `since`) did not write since then, are left out."""
    import pandas as pd

    root = Path(results_dir)
    samples = []
    health = root / "health" / "health_before.csv"
    if _fresh(health, since):
        from distbench.health.table import read_health_csv, rows_of

        samples += health_samples(node, rows_of(read_health_csv(health)))
    comm = root / "tables" / "comm_summary.csv"
    if _fresh(comm, since):
        df = pd.read_csv(comm)
        df = df[df["status"] == "ok"] if "status" in df else df
        # one series per op, size, backend, ranks and timing: NCCL's default settings, out of place, first
        order = [c for c in ("nccl_env", "inplace") if c in df]
        if order:
            df = df.assign(_d=df.get("nccl_env", "default") != "default").sort_values(["_d", *order[1:]], kind="stable")
        kind = _run_node_type(root)
        for _, r in df.iterrows():
            samples += comm_sample(node, r["op"], int(r["size_bytes"]), r["backend"], int(r["world_size"]),
                                   r.get("timing", ""), r.get("busbw_gbps_median"), r.get("time_us_median"), kind)
    training = root / "tables" / "training_summary.csv"
    if _fresh(training, since):
        df = pd.read_csv(training)
        for _, r in df.iterrows():
            labels = {"node": node, "model": r.get("model", ""), "strategy": r.get("strategy", ""),
                      "config": r.get("config", ""), "backend": r.get("backend", ""),
                      "world_size": str(r.get("world_size", ""))}
            samples.append(("distbench_training_step_time_ms", labels, r.get("step_time_ms_median")))
            samples.append(("distbench_training_mfu", labels, r.get("mfu")))
    gate = root / "health" / "gate.csv"  # `snakemake gate`'s verdict, when this invocation ran it
    if _fresh(gate, since):
        verdict = pd.read_csv(gate).query("check == 'verdict'")
        if len(verdict) and verdict["state"].iloc[-1] in STATUS:
            samples.append(("distbench_gate_status", {"node": node}, float(STATUS[verdict["state"].iloc[-1]])))
    samples.append(timestamp(node, "run"))
    return samples


def write_run_metrics(directory, results_dir, node: str | None = None, since: float | None = None) -> str:
    """A finished run's metrics into `directory` (config prometheus_dir; rules/gate.smk's onsuccess),
    and the line saying so. `since` (the invocation's start): only tables written since then; none of
    the run's own written since (a rerun with nothing to do, `snakemake gate` alone): the file is left
    as it is. A metrics file never fails a finished run: a failure is said, not raised."""
    from distbench.core.run_label import node_name

    try:
        if since is not None and not any(_fresh(Path(results_dir) / t, since) for t in RUN_TABLES):
            return (f"distbench: metrics in {directory} left as they are: this run wrote none of "
                    f"{', '.join(RUN_TABLES)} (an older table is never published as new)")
        return (f"distbench: metrics written to "
                f"{write(directory, run_samples(results_dir, node or node_name(), since))}")
    except Exception as e:  # noqa: BLE001 - the run's results stand whatever the metrics directory does
        return f"distbench: no metrics written to {directory}: {e}"
