"""Join the probes onto the measurements: % of link peak, NCCL's algorithm per size, and advice.

aggregate_comm (distbench.comm.analysis.summary.aggregate) calls it on the summary before writing
comm_summary.csv, so that one table, written once, carries them: the report, the prediction and
summary.json read the same file. The advice document goes beside it (tables/comm_advice.json)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.comm.analysis.advice import advise, percent_of_peak
from distbench.core.io import atomic_write_json
from distbench.core.readers import read_json, remake
from distbench.core.references import link_peak
from distbench.core.ops_spec import NCCL_NAMES, SPECS


def _load(path) -> dict | None:
    if not path or not Path(path).exists():
        return None
    data = read_json(path, remake(path))  # the one reader: a torn file is named, with its fix
    return data if data.get("available", True) else None


def pick_placement(placement_files) -> list[dict] | None:
    """The ranks of the job with a placement error, else of the largest NCCL job."""
    best = None
    for f in placement_files or []:
        data = read_json(f, remake(f))
        ranks = data.get("ranks") or []
        if data.get("error") and ranks:
            return ranks
        if ranks and ranks[0].get("uuid") and (best is None or len(ranks) > len(best)):
            best = ranks
    return best


def join_nccl_algo(summary: pd.DataFrame, nccl: dict | None) -> pd.DataFrame:
    """nccl_algo/nccl_proto columns from the probe's TUNING lines, for NCCL rows with default settings."""
    out = summary.copy()
    out["nccl_algo"], out["nccl_proto"] = pd.NA, pd.NA
    rows = (nccl or {}).get("algo_by_size") or []
    if not rows:
        return out
    # NCCL logs a split op's (AllGather/ReduceScatter) bytes per rank; our size_bytes is the total buffer.
    per_rank = {op for op in NCCL_NAMES.values() if SPECS[op].split_across_ranks}
    nranks = int((nccl or {}).get("nranks") or 1)
    choice = {}
    for r in rows:
        op = NCCL_NAMES.get(r["op"])
        if op:
            choice[(op, int(r["size_bytes"]) * (nranks if op in per_rank else 1))] = (r["algo"], r["proto"])
    for i in out.index[(out["backend"] == "nccl") & (out["nccl_env"] == "default")]:
        hit = choice.get((out.at[i, "op"], int(out.at[i, "size_bytes"])))
        if hit:
            out.at[i, "nccl_algo"], out.at[i, "nccl_proto"] = hit
    return out


NCCL_REPORT_KEYS = ("nccl_version_full", "nranks", "nnodes", "channels", "transport_counts", "net_plugin",
                    "nvls", "collnet", "env", "algo_ranges", "warnings")


def nccl_digest(nccl: dict | None) -> dict | None:
    """What the report shows of NCCL's log; the full parse stays in results/<label>/probe/nccl.json."""
    if not nccl:
        return None
    return {k: nccl.get(k) for k in NCCL_REPORT_KEYS if nccl.get(k) not in (None, [], {})}


def diagnose(summary: pd.DataFrame, env_json, topology_json, nccl_json, placement_files,
             out_json) -> pd.DataFrame:
    """The summary with % of the link peak and NCCL's algorithm/protocol per point; the probes'
    digest (peak, topology, NCCL, placement, advice) written to out_json."""
    env = read_json(env_json, remake(env_json))
    topo_file = _load(topology_json) or {}
    topology = topo_file.get("topology")
    nvlink = topo_file.get("nvlink")
    nccl = _load(nccl_json)
    gpu_name = (env.get("gpus") or [{}])[0].get("name")
    # a link between GPUs needs two of them, on this host or across nodes: a one-GPU node has none
    # (its Gloo rows are CPU processes: no share of an NVLink or PCIe peak)
    between = (env.get("gpu_count") or 0) >= 2 or ((nccl or {}).get("nnodes") or 1) > 1
    peak = link_peak(topology, nvlink, nccl, gpu_name) if env.get("gpu_count") and between else None
    placement = pick_placement(placement_files)
    table = join_nccl_algo(percent_of_peak(summary, (peak or {}).get("peak_gbps")), nccl)
    extra = {
        "advice": advise(summary, env, topology, nccl, placement, peak),
        "topology": topology, "nvlink": nvlink, "nccl": nccl_digest(nccl),
        "peak": peak if peak and peak.get("peak_gbps") else None,
        "placement": placement,
    }
    atomic_write_json(out_json, extra)
    return table
