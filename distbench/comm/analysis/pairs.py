"""The GPU-pair matrix's analysis, from the comm family's pairs.csv files (distbench.comm.contract.PAIRS) and
the topology probe (results/<label>/probe/topology.json): tables and sentences only, no torch.

- summarize_pairs: one row per measured point (job keys, mode, src, dst, size): statistics over
  the trials, the worst status, whether every trial was correct.
- link_classes / add_link_classes: the path each pair crosses: NET (different hosts), cpu (Gloo on
  CPU), the `nvidia-smi topo -m` cell of its two GPUs matched by UUID (NV18, PIX, PXB, PHB, NODE,
  SYS), or unknown (no topology, or GPUs the topology does not name).
- slow_pairs: each one-way pair against the median of the pairs of its link class: bandwidth at
  the largest size, latency at the smallest. Comparing within a class is the point: a PCIe pair is
  not slow next to NVLink pairs, but one NV18 pair at a tenth of the others is a bad link.
- pair_findings: a sentence per flagged pair, or one summary sentence per job when none is.
- write_pairs_table: every pairs.csv -> results/<label>/tables/pairs.csv.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from distbench.core.choices import STATUS_SEVERITY
from distbench.comm.analysis.findings import STATUS_PHRASES, human_time_us
from distbench.core.choices import backend_name
from distbench.core.io import atomic_write_csv
from distbench.comm.contract import read_pairs_csv
from distbench.core.sizes import human_bytes

JOB_KEYS = ("backend", "world_size", "nodes", "dtype")
KEYS = (*JOB_KEYS, "mode", "src", "dst", "size_bytes")
SUMMARY_COLUMNS = KEYS + (
    "src_host", "dst_host", "src_gpu", "dst_gpu", "n_trials", "time_us_median", "time_us_p5", "time_us_p95",
    "algbw_gbps_median", "correct", "status", "message",
)
TOPOLOGY_COLUMNS = ("link_class", "src_gpu_name", "dst_gpu_name")
TABLE_COLUMNS = SUMMARY_COLUMNS + TOPOLOGY_COLUMNS
SLOW_COLUMNS = KEYS + (
    "src_host", "dst_host", "src_gpu_name", "dst_gpu_name", "link_class", "check", "n_class_pairs",
    "algbw_gbps_median", "class_median_gbps", "class_lo_gbps", "class_hi_gbps",
    "time_us_median", "class_median_us", "class_lo_us", "class_hi_us", "ratio", "flagged",
)
NET, CPU, UNKNOWN = "NET", "cpu", "unknown"
THRESHOLD = 0.7  # a pair below 70% of its class's median speed is flagged
# Small transfers through torch are bound by the host's issue rate, not the link (8 B send/recv:
# 55-137 µs between H100s on NV18, benchmarks/results/comm-pairs-h100x4-2026-11-26), so their spread is wide:
# only a pair at least twice as slow as its class's median is flagged for latency.
LATENCY_THRESHOLD = 0.5
# What to look at when a pair of a class is slow.
ADVICE = {
    "NV": "check that link (nvidia-smi nvlink -s, nvidia-smi topo -m)",
    "PCIe": "check the PCIe path of the two GPUs (nvidia-smi -q -d PCIE for link generation and width, "
            "nvidia-smi topo -m)",
    NET: "check the network between the two hosts (ibstat or ethtool, and NCCL_DEBUG=INFO for the transport NCCL chose)",
    CPU: "check the load and CPU affinity of the two ranks' hosts",
    UNKNOWN: "check the path between the two GPUs (nvidia-smi topo -m, nvidia-smi nvlink -s)",
}
NAN = float("nan")


# ---------------------------------------------------------------- summary
def _worst(statuses) -> str:
    return min(statuses, key=STATUS_SEVERITY.__getitem__)


def summarize_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Statistics over trials per (job, mode, src, dst, size); time and bandwidth over ok trials only
    (a failed trial has no time), status the worst of all trials."""
    rows = []
    for key, g in df.groupby(list(KEYS), sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        t = ok["time_us"].astype("float64")
        corr = g["correct"].dropna()
        first = g.iloc[0]
        rows.append({
            **dict(zip(KEYS, key)),
            **{c: first[c] for c in ("src_host", "dst_host", "src_gpu", "dst_gpu")},
            "n_trials": len(ok),
            "time_us_median": t.median() if len(t) else NAN,
            "time_us_p5": t.quantile(0.05) if len(t) else NAN,
            "time_us_p95": t.quantile(0.95) if len(t) else NAN,
            "algbw_gbps_median": ok["algbw_gbps"].astype("float64").median() if len(ok) else NAN,
            "correct": bool(corr.all()) if len(corr) else pd.NA,
            "status": _worst(g["status"]),
            "message": next((m for m in g["message"].fillna("") if m), ""),
        })
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


# ---------------------------------------------------------------- link classes
def load_topology(path) -> dict | None:
    """The `topology` part of the probe's JSON; None when the file is missing or the probe found none."""
    if path is None or not Path(path).exists():
        return None
    return _topology_part(json.loads(Path(path).read_text()))


def _topology_part(topology: dict | None) -> dict | None:
    """Accept the probe's whole JSON or its `topology` part; None when unavailable."""
    if not topology or topology.get("available") is False:
        return None
    inner = topology.get("topology", topology)
    if not inner or inner.get("available") is False:
        return None
    return inner


def _link_raw(topo: dict, a: str, b: str) -> str | None:
    for link in topo.get("links") or []:
        if {link.get("a"), link.get("b")} == {a, b}:
            raw = link.get("raw")
            return "SYS" if raw == "SOC" else raw  # SOC: the pre-2017 spelling of SYS
    return None


def _uuid_key(uuid) -> str:
    """One spelling of a GPU UUID: nvidia-smi/NVML write 'GPU-0cab...', torch writes '0cab...'."""
    text = str(uuid).strip().lower()
    return text[4:] if text.startswith("gpu-") else text


class _ByUuid(dict):
    """UUID -> GPU name, looked up in either spelling."""

    def get(self, key, default=None):
        return super().get(_uuid_key(key), default)


def _gpu_names(topo: dict | None) -> dict[str, str]:
    """GPU UUID -> the topology's name for it (GPU0, GPU1, ...)."""
    return _ByUuid({_uuid_key(uuid): name for name, uuid in ((topo or {}).get("gpu_uuids") or {}).items() if uuid})


def _is_cpu(gpu) -> bool:
    return str(gpu).lower() == CPU


def _pair_class(r, topo: dict | None, names: dict[str, str]) -> str:
    if r["src_host"] != r["dst_host"]:
        return NET
    if _is_cpu(r["src_gpu"]) or _is_cpu(r["dst_gpu"]):
        return CPU
    a, b = names.get(r["src_gpu"]), names.get(r["dst_gpu"])
    if topo is None or a is None or b is None:
        return UNKNOWN  # no probe, or a host the probe did not run on
    if a == b:
        return "same GPU"  # two ranks sharing a GPU: no link crossed
    return _link_raw(topo, a, b) or UNKNOWN


def link_classes(summary: pd.DataFrame, topology: dict | None) -> pd.Series:
    """The link class of every row (see the module docstring); `topology` is the probe's JSON or
    its `topology` part, or None."""
    topo = _topology_part(topology)
    names = _gpu_names(topo)
    return pd.Series([_pair_class(r, topo, names) for _, r in summary.iterrows()], index=summary.index,
                     dtype="object", name="link_class")


def add_link_classes(summary: pd.DataFrame, topology: dict | None) -> pd.DataFrame:
    """The summary with link_class and the topology's names of the two GPUs (empty when unnamed),
    which the sentences use to say which GPUs a slow pair joins."""
    names = _gpu_names(_topology_part(topology))
    out = summary.copy()
    out["link_class"] = link_classes(summary, topology)
    out["src_gpu_name"] = [names.get(g, "") for g in summary["src_gpu"]]
    out["dst_gpu_name"] = [names.get(g, "") for g in summary["dst_gpu"]]
    return out


def _text(col: pd.Series) -> pd.Series:
    """Empty cells as "" (a plain read_csv makes an all-empty text column float NaN)."""
    return col.astype("object").where(col.notna(), "")


def _with_classes(summary: pd.DataFrame) -> pd.DataFrame:
    if "link_class" in summary:
        out = summary.copy()
        for c in ("src_gpu_name", "dst_gpu_name"):
            out[c] = _text(out[c]) if c in out else ""
        return out
    return add_link_classes(summary, None)


# ---------------------------------------------------------------- slow pairs
def _ok_uni(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[(summary["mode"] == "uni") & (summary["status"] == "ok")]


def _at_size(df: pd.DataFrame, pick) -> pd.DataFrame:
    """Per job, the rows at the size that `pick` (max or min) chooses among the job's sizes."""
    if df.empty:
        return df
    size = df.groupby(list(JOB_KEYS), dropna=False)["size_bytes"].transform(pick)
    return df[df["size_bytes"] == size]


def _compare(rows: pd.DataFrame, value: str, faster_is_higher: bool, threshold: float) -> pd.DataFrame:
    """Each row against the median of its job's pairs of the same link class. ratio is the pair's
    speed over the median's (bandwidth / median, or median time / time), so < threshold is slow in
    both checks. lo/hi: the range of the class's other pairs that are not slow themselves, which is
    what the sentence holds a slow pair against (a bad link is usually slow both ways)."""
    rows = rows.copy()
    groups = [*JOB_KEYS, "link_class"]
    median = rows.groupby(groups, dropna=False)[value].transform("median")
    rows["class_median"] = median
    rows["n_class_pairs"] = rows.groupby(groups, dropna=False)[value].transform("size")
    rows["ratio"] = rows[value] / median if faster_is_higher else median / rows[value]
    rows["flagged"] = rows["ratio"] < threshold
    rows["class_lo"], rows["class_hi"] = NAN, NAN
    for _, g in rows.groupby(groups, dropna=False):
        values, healthy = g[value].to_numpy(float), ~g["flagged"].to_numpy(bool)
        for i, idx in enumerate(g.index):
            others = values[healthy & (np.arange(len(g)) != i)]
            if len(others):
                rows.loc[idx, ["class_lo", "class_hi"]] = others.min(), others.max()
    return rows


def slow_pairs(summary: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per one-way ok pair and check: `bandwidth` at each job's largest size (flagged below
    threshold x its class's median GB/s), `latency` at its smallest size when that is smaller
    (flagged above 1/LATENCY_THRESHOLD x its class's median time, or 1/threshold if stricter)."""
    s = _ok_uni(_with_classes(summary))
    parts = []
    bw = _compare(_at_size(s, "max"), "algbw_gbps_median", True, threshold)
    if len(bw):
        parts.append(bw.assign(check="bandwidth").rename(columns={
            "class_median": "class_median_gbps", "class_lo": "class_lo_gbps", "class_hi": "class_hi_gbps"}))
    small = _at_size(s, "min")
    small = small[small["size_bytes"] < s.groupby(list(JOB_KEYS), dropna=False)["size_bytes"].transform("max")
                  .reindex(small.index)]
    lat = _compare(small, "time_us_median", False, min(threshold, LATENCY_THRESHOLD))
    if len(lat):
        parts.append(lat.assign(check="latency").rename(columns={
            "class_median": "class_median_us", "class_lo": "class_lo_us", "class_hi": "class_hi_us"}))
    if not parts:
        return pd.DataFrame(columns=list(SLOW_COLUMNS))
    out = pd.concat(parts, ignore_index=True).reindex(columns=list(SLOW_COLUMNS))
    out["flagged"] = out["flagged"].astype(bool)
    return out


# ---------------------------------------------------------------- sentences
def _gbps(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def _gbps_range(lo: float, hi: float) -> str:
    a, b = _gbps(lo), _gbps(hi)
    return f"{a} GB/s" if a == b else f"{a}-{b} GB/s"


def _time_range(lo: float, hi: float) -> str:
    a, b = human_time_us(lo), human_time_us(hi)
    if a == b:
        return a
    (va, ua), (vb, ub) = a.split(" "), b.split(" ")
    return f"{va}-{vb} {ua}" if ua == ub else f"{a}-{b}"


def _job_label(job: tuple, dtypes_in_table: int) -> str:
    backend, ws, nodes, dtype = job
    where = f"{int(ws)} ranks" + (f" on {int(nodes)} nodes" if pd.notna(nodes) and int(nodes) > 1 else "")
    name = backend_name(backend) + (f" {dtype}" if dtypes_in_table > 1 else "")
    return f"{name}, {where}"


def _where(r) -> str:
    """Which hosts (across hosts: GPU numbers repeat on every host) or GPUs (the topology's names)
    a pair joins."""
    if r["src_host"] != r["dst_host"]:
        return f"{r['src_host']} -> {r['dst_host']}"
    if r["src_gpu_name"] and r["dst_gpu_name"]:
        return f"{r['src_gpu_name']} -> {r['dst_gpu_name']}"
    return f"both on {r['src_host']}"


def _advice(link_class: str) -> str:
    if str(link_class).startswith("NV"):
        return ADVICE["NV"]
    if link_class in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return ADVICE["PCIe"]
    return ADVICE.get(link_class, ADVICE[UNKNOWN])


def _others(r, n_others: int) -> str:
    cls = "" if r["link_class"] == UNKNOWN else f"{r['link_class']} "
    return f"the other {cls}pair" + ("s" if n_others != 1 else "")


def _slow_sentence(label: str, r) -> str:
    pair = f"rank {int(r['src'])} -> rank {int(r['dst'])} ({_where(r)})"
    n_others = int(r["n_class_pairs"]) - 1
    if r["check"] == "bandwidth":
        what = f"moves {_gbps(r['algbw_gbps_median'])} GB/s at {human_bytes(r['size_bytes'])}"
        ref = (_gbps_range(r["class_lo_gbps"], r["class_hi_gbps"]) if pd.notna(r["class_lo_gbps"])
               else f"median {_gbps(r['class_median_gbps'])} GB/s")
    else:
        what = f"takes {human_time_us(r['time_us_median'])} per {human_bytes(r['size_bytes'])} transfer"
        ref = (_time_range(r["class_lo_us"], r["class_hi_us"]) if pd.notna(r["class_lo_us"])
               else f"median {human_time_us(r['class_median_us'])}")
    return f"GPU-pair matrix ({label}): {pair} {what}, {_others(r, n_others)} {ref}: {_advice(r['link_class'])}."


def _summary_sentence(label: str, job_rows: pd.DataFrame, checks: pd.DataFrame, threshold: float) -> str | None:
    bw = checks[checks["check"] == "bandwidth"]
    if bw.empty:
        return None
    classes = ", ".join(sorted(bw["link_class"].astype(str).unique()))
    size = int(bw["size_bytes"].iloc[0])
    one_way = _gbps_range(bw["algbw_gbps_median"].min(), bw["algbw_gbps_median"].max())
    within = f"{classes}: all pairs within {100 * (1 - threshold):.0f}% of their class median"
    parts = [f"{one_way} one way at {human_bytes(size)} ({within})"]
    bi = _at_size(job_rows[(job_rows["mode"] == "bi") & (job_rows["status"] == "ok")], "max")
    if len(bi):
        parts.append(f"{_gbps_range(bi['algbw_gbps_median'].min(), bi['algbw_gbps_median'].max())} both ways"
                     + ("" if int(bi["size_bytes"].iloc[0]) == size else f" at {human_bytes(bi['size_bytes'].iloc[0])}"))
    lat = checks[checks["check"] == "latency"]
    if len(lat):
        parts.append(f"latency at {human_bytes(lat['size_bytes'].iloc[0])} "
                     f"{_time_range(lat['time_us_median'].min(), lat['time_us_median'].max())}")
    n = bw[["src", "dst"]].drop_duplicates().shape[0]
    return f"GPU-pair matrix ({label}, {n} ordered pairs): {', '.join(parts)}."


def _problem_sentence(label: str, job_rows: pd.DataFrame, limit: int = 3) -> str | None:
    """Points that did not run ok: a pair that failed is missing from every comparison above."""
    bad = job_rows[job_rows["status"] != "ok"].sort_values("status", key=lambda s: s.map(STATUS_SEVERITY))
    if bad.empty:
        return None
    examples = [f"rank {int(r['src'])} -> rank {int(r['dst'])} at {human_bytes(r['size_bytes'])} "
                f"{'one way' if r['mode'] == 'uni' else 'both ways'} {STATUS_PHRASES.get(r['status'], r['status'])}"
                .replace(" were ", " was ") + (f" ({r['message']})" if r["message"] else "")
                for _, r in bad.head(limit).iterrows()]
    more = f" and {len(bad) - limit} more" if len(bad) > limit else ""
    return (f"GPU-pair matrix ({label}): {len(bad)} of {len(job_rows)} pair measurements did not run ok: "
            f"{'; '.join(examples)}{more}.")


def pair_findings(summary: pd.DataFrame, threshold: float = THRESHOLD) -> list[str]:
    """Per job: the points that did not run ok, then a sentence per flagged pair (bandwidth first),
    or, when no pair is flagged, one sentence with the ranges measured."""
    if summary is None or len(summary) == 0:
        return []
    s = _with_classes(summary)
    s["message"] = _text(s["message"]) if "message" in s else ""
    checks = slow_pairs(s, threshold)
    lines = []
    for job, job_rows in s.groupby(list(JOB_KEYS), sort=True, dropna=False):
        dtypes = s[(s["backend"] == job[0]) & (s["world_size"] == job[1])]["dtype"].nunique()
        label = _job_label(job, dtypes)
        problem = _problem_sentence(label, job_rows)
        lines += [problem] if problem else []
        mine = checks[(checks[list(JOB_KEYS)] == pd.Series(job, index=list(JOB_KEYS))).all(axis=1)]
        flagged = mine[mine["flagged"]].sort_values(["check", "src", "dst"])
        if len(flagged):
            lines += [_slow_sentence(label, r) for _, r in flagged.iterrows()]
        else:
            line = _summary_sentence(label, job_rows, mine, threshold)
            lines += [line] if line else []
    return lines


# ---------------------------------------------------------------- table
def _has_rows(path: Path) -> bool:
    """False for an empty file or a header alone: the job measured nothing (its header may even be
    an older contract's), so there is nothing to read or check."""
    with open(path) as f:
        return sum(1 for line in f if line.strip()) > 1


def write_pairs_table(pairs_csvs, topology_json, out_csv) -> pd.DataFrame:
    """Every pairs.csv with rows, summarized, with link classes from the topology probe (missing or
    unavailable: unknown), written atomically to out_csv; returned."""
    frames = [read_pairs_csv(p) for p in map(Path, pairs_csvs) if _has_rows(p)]
    frames = [f for f in frames if len(f)]
    if frames:
        table = add_link_classes(summarize_pairs(pd.concat(frames, ignore_index=True)), load_topology(topology_json))
    else:
        table = pd.DataFrame(columns=list(TABLE_COLUMNS))
    table = table.reindex(columns=list(TABLE_COLUMNS))
    atomic_write_csv(out_csv, table)
    return table


def read_pairs_table(path) -> pd.DataFrame:
    """results/<label>/tables/pairs.csv as written by write_pairs_table; missing or empty: no rows."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    df = pd.read_csv(path, dtype={"link_class": "string", "src_gpu_name": "string", "dst_gpu_name": "string",
                                  "src_host": "string", "dst_host": "string", "message": "string"},
                     keep_default_na=False, na_values=[""])
    for c in ("src_gpu_name", "dst_gpu_name", "message"):
        df[c] = df[c].fillna("")
    return df
