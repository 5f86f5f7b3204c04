"""The job view of parsed NCCL logs: communicators, their init findings, transport summaries, merging.

nccl_log collects each log's facts per communicator (NCCL's commId); finish_result derives what the
report cites from them (transport counts and families, per-communicator init state, GPUDirect RDMA
summary), and merge_parsed joins the parses of one log file per rank into one view of the job.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Init states in the order a rank passes them: a later line (or another file) never moves a rank back.
INIT_ORDER = {None: 0, "started": 1, "complete": 2}


@dataclass
class Comm:
    """One communicator: every rank's record, keyed by rank; comm_id is NCCL's commId hash when logged."""
    comm_id: str | None
    nranks: int
    ranks: dict[int, dict] = field(default_factory=dict)


def finish_result(result: dict, comms: dict[str, Comm], conns: Counter, findings: list[str] | None = None) -> None:
    """Derive transports, the per-communicator view, summaries and findings from the collected facts."""
    result["transports"] = [
        {"src": s, "dst": d, "transport": t, "direction": direction, "count": n}
        for (s, d, t, direction), n in sorted(conns.items())
    ]
    counts: Counter = Counter()
    for (_, _, t, _), n in conns.items():
        counts[t] += n
    if result["collnet_detail"]["connections"]:
        counts["CollNet"] += len(result["collnet_detail"]["connections"])
    result["transport_counts"] = dict(counts)
    env = result["env"]
    result["nvls"]["enabled_env"] = env.get("NCCL_NVLS_ENABLE")
    result["collnet"]["enabled_env"] = env.get("NCCL_COLLNET_ENABLE")

    result["communicators"], init_findings = _communicators(comms)
    result["findings"] = init_findings + (findings or [])
    result["warnings"] = result["warn_lines"] + result["findings"]
    result["gdrdma"] = {**_gdr_summary(result["net_connections"]), "checks": result["gdrdma"]["checks"]}
    result["transport_families"] = _families(result, counts)


def _communicators(comms: dict[str, Comm]) -> tuple[list[dict], list[str]]:
    """Per communicator: its ranks and their init state; a rank that logged Init START but never
    Init COMPLETE is a finding (it hung or failed in init, and the other ranks wait for it)."""
    out, findings = [], []
    for comm in comms.values():
        ranks = [comm.ranks[r] for r in sorted(comm.ranks)]
        complete = [r["rank"] for r in ranks if r["init"] == "complete"]
        stuck = [r["rank"] for r in ranks if r["init"] == "started"]
        missing = [r for r in range(comm.nranks) if r not in comm.ranks]
        if stuck:
            all_complete = False
        elif not missing and len(complete) == len(ranks):
            all_complete = True
        else:
            all_complete = None  # not every rank is in the log, or it has no init lines
        out.append({"comm_id": comm.comm_id, "nranks": comm.nranks, "ranks": ranks, "ranks_seen": len(ranks),
                    "missing_ranks": missing, "init_complete_ranks": complete, "init_incomplete_ranks": stuck,
                    "all_init_complete": all_complete})
        if stuck:
            findings.append(_init_finding(comm, stuck, missing, len(complete)))
    return out, findings


def _init_finding(comm: Comm, stuck: list[int], missing: list[int], n_complete: int) -> str:
    """One line per communicator that did not finish init: which ranks, where they ran, who is absent."""
    name = comm.comm_id or comm.ranks[stuck[0]]["comm"]
    where = []
    for r in stuck[:8]:  # a 1000-rank hang should stay one readable line
        rec = comm.ranks[r]
        where.append(f"rank {r}: " + ", ".join(f"{k} {rec[k]}" for k in ("host", "pid", "cudaDev", "busId")
                                               if rec.get(k) is not None))
    if len(stuck) > 8:
        where.append(f"{len(stuck) - 8} more")
    text = (f"communicator {name}: {_plural('rank', stuck)} of {comm.nranks} logged Init START but never "
            f"Init COMPLETE ({'; '.join(where)}); {n_complete} of {comm.nranks} ranks completed: "
            f"init hung or failed there")
    if missing and len(comm.ranks) > 1:  # one rank's own file lacks the others anyway: no news there
        text += (f"; absent from the log: {_plural('rank', missing)} (if the log holds every process, they "
                 f"never started this communicator and the others wait for them)")
    return text


def _plural(word: str, items: list[int]) -> str:
    """ "rank 3" or "ranks 0, 1, 2", the list cut after 8 so one line stays readable."""
    shown = ", ".join(map(str, items[:8])) + (f" and {len(items) - 8} more" if len(items) > 8 else "")
    return f"{word}{'s' if len(items) > 1 else ''} {shown}"


def _gdr_summary(net_connections: list[dict]) -> dict:
    """How many NET connections use GPUDirect RDMA, overall and per NIC."""
    per_nic: dict[tuple, dict] = {}
    for c in net_connections:
        nic = per_nic.setdefault((c["net"], c["nic"]), {"net": c["net"], "nic": c["nic"], "name": c["nic_name"],
                                                         "connections": 0, "gdrdma": 0})
        nic["connections"] += 1
        nic["gdrdma"] += int(c["gdrdma"])
    n = len(net_connections)
    with_gdr = sum(1 for c in net_connections if c["gdrdma"])
    return {"net_connections": n, "gdrdma_connections": with_gdr, "all_gdrdma": (with_gdr == n) if n else None,
            "nics": [per_nic[k] for k in sorted(per_nic)]}


def _families(result: dict, counts: Counter) -> list[str]:
    """Transport families NCCL set up: the connection transports plus NVLS and CollNet when connected."""
    families = set(counts)
    if result["nvls_detail"]["connected"] or any(r.get("nvls_head") for c in result["communicators"]
                                                 for r in c["ranks"]):
        families.add("NVLS")
    if result["collnet_detail"]["connected"]:
        families.add("CollNet")
    return sorted(families)


def _merge_rank(old: dict | None, new: dict) -> dict:
    """One rank's record from two files: known values win over None, the further init state wins."""
    if old is None:
        return dict(new)
    out = dict(old)
    for k, v in new.items():
        if k == "init":
            out[k] = v if INIT_ORDER[v] > INIT_ORDER[old.get(k)] else old.get(k)
        elif out.get(k) in (None, False):
            out[k] = v
    return out


def _merged_comms(parts: list[dict]) -> dict[str, Comm]:
    """Communicators of several parses joined by commId (one file per rank shows one rank of each)."""
    comms: dict[str, Comm] = {}
    for i, p in enumerate(parts):
        for j, c in enumerate(p.get("communicators", [])):
            key = c["comm_id"] or f"part{i}:{j}"  # without a commId, a communicator is one process's
            comm = comms.setdefault(key, Comm(c["comm_id"], c["nranks"]))
            for r in c["ranks"]:
                comm.ranks[r["rank"]] = _merge_rank(comm.ranks.get(r["rank"]), r)
    return comms


def merge_parsed(parts: list[dict]) -> dict:
    """Merge per-rank parses (one log file per rank) into one view of the job."""
    if not parts:
        raise ValueError("no NCCL logs to merge")
    if len(parts) == 1:
        return parts[0]
    out = {k: v for k, v in parts[0].items()}
    first = lambda key: next((p[key] for p in parts if p.get(key) is not None), None)  # noqa: E731
    for key in ("nccl_version", "nccl_version_full", "cuda_driver_version", "net_plugin", "channels"):
        out[key] = first(key)
    out["sources"] = [s for p in parts for s in p.get("sources", [])]
    out["nranks"] = max((p["nranks"] for p in parts if p.get("nranks")), default=None)
    out["hosts"] = list(dict.fromkeys(h for p in parts for h in p["hosts"]))
    ranks = {r["rank"]: r for p in parts for r in p["ranks"]}
    out["ranks"] = [ranks[r] for r in sorted(ranks)]
    nnodes = [p["nnodes"] for p in parts if p.get("nnodes")]
    out["nnodes"] = max(nnodes) if nnodes else (len(out["hosts"]) if len(out["hosts"]) > 1 else None)
    conns: Counter = Counter()
    for p in parts:
        for t in p["transports"]:
            conns[(t["src"], t["dst"], t["transport"], t["direction"])] += t["count"]
    for key in ("rings", "trees", "tuning", "colls", "warn_lines", "net_devices", "net_connections", "tuning_tables"):
        out[key] = [x for p in parts for x in p.get(key, [])]
    out["net_speeds_mbps"] = {k: v for p in parts for k, v in p["net_speeds_mbps"].items()}
    out["env"] = {k: v for p in parts for k, v in p["env"].items()}
    out["nccl_paths"] = {h: paths for p in reversed(parts) for h, paths in p.get("nccl_paths", {}).items()}
    findings = []
    versions = sorted({p["nccl_version"] for p in parts if p.get("nccl_version")})
    if len(versions) > 1:
        findings.append(f"ranks report different NCCL versions: {', '.join(versions)}")
    out["info_lines"] = sum(p["info_lines"] for p in parts)
    out["nvls"] = dict(parts[0]["nvls"])
    out["collnet"] = dict(parts[0]["collnet"])
    for p in parts:
        for k in ("channels", "multicast_supported"):
            if out["nvls"].get(k) is None:
                out["nvls"][k] = p["nvls"].get(k)
        if out["collnet"].get("channels") is None:
            out["collnet"]["channels"] = p["collnet"].get("channels")
    out["nvls_detail"] = {"connected": any(p["nvls_detail"]["connected"] for p in parts),
                          "multicast": [x for p in parts for x in p["nvls_detail"]["multicast"]]}
    out["collnet_detail"] = {"connected": any(p["collnet_detail"]["connected"] for p in parts),
                             "connections": [x for p in parts for x in p["collnet_detail"]["connections"]]}
    out["gdrdma"] = {"checks": [x for p in parts for x in p["gdrdma"]["checks"]]}
    finish_result(out, _merged_comms(parts), conns, findings)
    return out
