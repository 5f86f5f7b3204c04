"""node_exporter textfile-collector files, in Prometheus' text exposition format, metric names with their
units. The gate and a full run each write a file of their own in the one textfile directory, and
neither ever removes or rewrites the other's:

  distbench_gate.prom   the gate's (`python -m distbench.gate --prom DIR`, `snakemake gate`): every series
                        labelled source="gate"
  distbench_run.prom    a full run's (config `prometheus_dir`, rules/gate.smk's onsuccess): source="run"

Each is written atomically: a temporary file in the same directory whose name does not end in .prom
(node_exporter reads only *.prom), then renamed, so the collector never reads half a file. A family that
both files hold has the same HELP and TYPE in both (one HELP table, below): node_exporter drops a
family's series whose HELP differs from another file's, and drops a series that another file already
gave it with the same labels, which the `source` label rules out.

  distbench_gate_status{node,source}                0 pass, 1 warn, 2 fail (the gate's verdict; the gate's file only)
  distbench_health_item_ok{node,gpu,item,source}    1 ok, 0 degraded or failing (not-available items left out)
  distbench_comm_busbw_gbps{node,node_type,op,size_bytes,backend,world_size,timing,dtype,traffic,source}
                                                    median bus bandwidth, GB/s
  distbench_comm_latency_us{...the same labels}     median time per op, µs
                                                    (node_type: '4x NVIDIA H200', the fleet a node is
                                                    compared within; 'cpu' without GPUs. dtype: float32,
                                                    bfloat16, ...; traffic: all_to_all_v's matrix,
                                                    uniform, zipf:S or file:PATH, 'none' for every other
                                                    op. The alert rules read only traffic none or uniform)
  distbench_training_step_time_ms{node,model,strategy,config,backend,world_size,source}   median step time (full runs)
  distbench_training_mfu{node,model,strategy,config,backend,world_size,source}     model FLOPs utilisation, 0-1
  distbench_run_timestamp_seconds{node,source}      when this was written (Unix time)

The gate writes the gate, health and comm metrics; a full run writes health, comm and training from its
tables: only the tables this Snakemake invocation wrote (their mtime not before its process started,
process_started_at), so an earlier run's figures are never republished under a fresh timestamp. The
gate's verdict is the gate's file's alone (`snakemake gate` writes it there itself): a run never
publishes one, so DistbenchGateFailed reads the gate whatever the run file holds. A run's comm series
are one per op, size, backend, ranks, timing, dtype and traffic: NCCL's default settings only (a
non-default sweep point is not the node's figure), out of place where both were measured; a key still
ambiguous after that is left out, never its first row. When the run wrote none of its tables (a rerun
with nothing to do, or `snakemake gate` alone) its file is left as it is. Torch-free.
"""

from __future__ import annotations

import time
from pathlib import Path

from distbench.core.io import atomic_write_text

GATE_FILE = "distbench_gate.prom"
RUN_FILE = "distbench_run.prom"
FILES = {"gate": GATE_FILE, "run": RUN_FILE}  # source label -> its file
GATE_DTYPE = "float32"  # the gate's collective (distbench.gate.check.run_comm: all_reduce, float32)
NO_TRAFFIC = "none"  # the traffic of an op that takes no traffic matrix (the comm tables' word)
ALERTED_TRAFFIC = ("none", "uniform")  # the busbw series DistbenchBusbwBelowFleet reads
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
                continue  # a series once (its callers give each once: run_comm_rows), and no NaN
            seen.add(key)
            out.append(f"{name}{key[1]} {float(value):.10g}")
    return "\n".join(out) + "\n"


def write(directory, samples: list[tuple[str, dict, float]], source: str = "gate") -> Path:
    """`samples` into `directory`'s file of `source` (FILES: the gate's or a full run's), every series
    labelled source=`source`, atomically; the other source's file is never touched. ValueError for a
    sample that names another source."""
    if source not in FILES:
        raise ValueError(f"source {source!r}: not one of {', '.join(FILES)}")
    stamped = []
    for metric, labels, value in samples:
        if labels.get("source", source) != source:
            raise ValueError(f"{metric}{_labels(labels)} is not {source}'s: it goes in {FILES[labels['source']]}")
        stamped.append((metric, {**labels, "source": source}, value))
    path = Path(directory) / FILES[source]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render(stamped))
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
                busbw_gbps: float | None, time_us: float | None, node_type: str, *, dtype: str = GATE_DTYPE,
                traffic: str = NO_TRAFFIC) -> list[tuple[str, dict, float]]:
    """One collective's busbw and latency samples. dtype and traffic default to the gate's collective's
    (float32, no traffic matrix); a full run passes its table's."""
    labels = {"node": node, "node_type": node_type, "op": op, "size_bytes": str(int(size_bytes)), "backend": backend,
              "world_size": str(int(world_size)), "timing": timing, "dtype": str(dtype), "traffic": str(traffic)}
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


COMM_KEYS = ("op", "size_bytes", "backend", "world_size", "timing", "dtype", "traffic")  # one series each


def run_comm_rows(df) -> list[dict]:
    """The comm summary's rows a full run publishes, one per COMM_KEYS: ok rows of NCCL's default
    settings (nccl_env 'default'; a table without the column: its rows), out of place where a key was
    measured both ways. A key that still has more than one row (the same collective on a different
    number of nodes, say) is left out: no row stands for it by its place in the table. A table without
    a dtype or traffic column (written before them) says neither: its rows are left out."""
    if "status" in df:
        df = df[df["status"] == "ok"]
    if "traffic" not in df and "op" in df:  # the comm contract's fill for a table without it
        df = df.assign(traffic=NO_TRAFFIC)
    if any(c not in df for c in COMM_KEYS):
        return []
    if "nccl_env" in df:
        df = df[df["nccl_env"].fillna("default").astype(str) == "default"]
    out = []
    for _, g in df.groupby(list(COMM_KEYS), sort=False, dropna=False):
        if len(g) > 1 and "inplace" in g:
            g = g[~g["inplace"].astype(str).str.lower().isin(("true", "1"))]
        if len(g) == 1:
            out.append(g.iloc[0].to_dict())
    return out


def run_samples(results_dir, node: str, since: float | None = None) -> list[tuple[str, dict, float]]:
    """A full run's metrics from its tables (results/<label>/): health before the benchmarks, the comm
    summary's rows (run_comm_rows), the training summary; never the gate's verdict (the gate's own file
    holds it). Tables a run did not make, or (with `since`) did not write since then, are left out."""
    import pandas as pd

    root = Path(results_dir)
    samples = []
    health = root / "health" / "health_before.csv"
    if _fresh(health, since):
        from distbench.health.table import read_health_csv, rows_of

        samples += health_samples(node, rows_of(read_health_csv(health)))
    comm = root / "tables" / "comm_summary.csv"
    if _fresh(comm, since):
        kind = _run_node_type(root)
        for r in run_comm_rows(pd.read_csv(comm)):
            samples += comm_sample(node, r["op"], int(r["size_bytes"]), r["backend"], int(r["world_size"]),
                                   r["timing"], r.get("busbw_gbps_median"), r.get("time_us_median"), kind,
                                   dtype=r["dtype"], traffic=r["traffic"])
    training = root / "tables" / "training_summary.csv"
    if _fresh(training, since):
        df = pd.read_csv(training)
        for _, r in df.iterrows():
            labels = {"node": node, "model": r.get("model", ""), "strategy": r.get("strategy", ""),
                      "config": r.get("config", ""), "backend": r.get("backend", ""),
                      "world_size": str(r.get("world_size", ""))}
            samples.append(("distbench_training_step_time_ms", labels, r.get("step_time_ms_median")))
            samples.append(("distbench_training_mfu", labels, r.get("mfu")))
    samples.append(timestamp(node, "run"))
    return samples


def write_run_metrics(directory, results_dir, node: str | None = None, since: float | None = None) -> str:
    """A finished run's metrics into `directory`'s RUN_FILE (config prometheus_dir; rules/gate.smk's
    onsuccess; the gate's GATE_FILE there is never touched), and the line saying so. `since` (the
    invocation's start): only tables written since then; none of the run's own written since (a rerun
    with nothing to do, `snakemake gate` alone): the file is left as it is. A metrics file never fails a finished run: a failure is
    said, not raised."""
    from distbench.core.run_label import node_name

    try:
        if since is not None and not any(_fresh(Path(results_dir) / t, since) for t in RUN_TABLES):
            return (f"distbench: metrics in {directory} left as they are: this run wrote none of "
                    f"{', '.join(RUN_TABLES)} (an older table is never published as new)")
        return (f"distbench: metrics written to "
                f"{write(directory, run_samples(results_dir, node or node_name(), since), 'run')}")
    except Exception as e:  # noqa: BLE001 - the run's results stand whatever the metrics directory does
        return f"distbench: no metrics written to {directory}: {e}"
