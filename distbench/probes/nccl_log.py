"""Parse NCCL_DEBUG=INFO logs (NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,TUNING) into facts the report cites.

What NCCL decided is only visible in its log: which transport each peer connection uses
(P2P over NVLink/PCIe, SHM through host memory, NET over sockets or InfiniBand), how many
channels it opened, whether NVLS/CollNet are on, which variables it took from the environment,
and (with TUNING) which algorithm/protocol it picked per collective and size.

Line formats follow NCCL's own INFO() format strings, 2.18 to 2.28:
  src/init.cc            "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"
                         "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, ..."
  src/transport/p2p.cc   "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s"   (CUMEM, IPC, direct pointer; /read)
  src/transport/shm.cc   "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s"
  src/transport/net.cc   "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s"  (also "(%d)" proxy rank)
  src/enqueue.cc         2.19+: "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
                         2.18:  "%ld Bytes -> Algo %d proto %d time %f" (op taken from the COLL line before it)
  src/collectives.cc     "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p"
  src/misc/param.cc      "%s set by environment to %s."
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Iterable

from distbench.sizes import human_bytes

# Index order of NCCL's ncclAlgoStr / ncclProtoStr (src/enqueue.cc, src/include/device.h).
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTO_NAMES = ("LL", "LL128", "Simple")
_ALGO_BY_UPPER = {a.upper(): a for a in ALGO_NAMES} | {"NVLS_TREE": "NVLSTree", "COLLNET_DIRECT": "CollNetDirect",
                                                      "COLLNET_CHAIN": "CollNetChain"}
_PROTO_BY_UPPER = {p.upper(): p for p in PROTO_NAMES}
# ncclDataType_t enum order -> element size in bytes (int8,uint8,int32,uint32,int64,uint64,half,float,double,bf16,fp8x2).
DTYPE_BYTES = (1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1)

# "host:pid:tid [dev] NCCL INFO msg", possibly behind an MPI/srun tag like "[0] " or "3: " (hence search, not match).
_LINE = re.compile(r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] )?NCCL (?P<lvl>INFO|WARN) (?P<msg>.*)$")
_VERSION = re.compile(r"^NCCL version (\S+)")
_DRIVER = re.compile(r"^cudaDriverVersion (\d+)")
_RANK = re.compile(r"\bcomm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)")
_FIELDS = {k: re.compile(rf"\b{k} (\S+)") for k in ("cudaDev", "nvmlDev", "busId", "nNodes", "localRanks", "localRank")}
_CHANNELS = re.compile(r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?(?:(?P<nvls>\d+) nvls channels, )?"
                       r"(?P<p2p>\d+) p2p channels, (?P<p2p_per_peer>\d+) p2p channels per peer")
_CONN = re.compile(r"^Channel (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[[0-9a-fx]+\] -> (?P<dst>\d+)\[[0-9a-fx]+\]"
                   r"(?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$")
_RING = re.compile(r"^Channel (?P<ch>\d+)/(?P<n>\d+) :\s+(?P<order>\d+(?:\s+\d+)*)\s*$")
_NETWORK = re.compile(r"^Using network (\S+)")
_NET_USING = re.compile(r"^NET/(?P<net>\w+) ?: Using (?P<devs>.*?)(?: ?; OOB .*)?$")
_NET_SPEED = re.compile(r"^NET/\w+ ?: \[\d+\] (?P<dev>[^:\s]+)\S* .*?\bspeed=(?P<mbps>\d+)")
_ENV = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>.*?)\.?\s*$")
_TUNE = re.compile(r"^(?:(?P<op>[A-Za-z]+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+)"
                   r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?(?: time (?P<time>[\d.]+))?")
_COLL = re.compile(r"^(?P<op>[A-Za-z]+): opCount (?P<opc>[0-9a-f]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
                   r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\]")


def _transport(via: str) -> str:
    """Normalise the text after "via" to a transport family, keeping the /read variant."""
    if via.startswith("NET/"):
        name = via.split("/")[1]
        # External IB plugins log as IBext_v8 etc.; they are still InfiniBand/RoCE verbs.
        return "NET/IB" if name.startswith("IB") else f"NET/{name}"
    if via.startswith("SHM"):
        return "SHM"
    if via.startswith("P2P/"):
        parts = via.split("/")
        base = "/".join(parts[:2])
        return base + "/read" if "read" in parts[2:] else base
    return via.split("/")[0]


def _algo(token: str) -> str:
    if token.isdigit():
        i = int(token)
        return ALGO_NAMES[i] if i < len(ALGO_NAMES) else token
    return _ALGO_BY_UPPER.get(token.upper(), token)


def _proto(token: str) -> str:
    if token.isdigit():
        i = int(token)
        return PROTO_NAMES[i] if i < len(PROTO_NAMES) else token
    return _PROTO_BY_UPPER.get(token.upper(), token)


def parse_nccl_log(text: str, source: str | None = None) -> dict:
    """Parse one NCCL INFO log. Raises ValueError when it holds no NCCL INFO lines."""
    result: dict = {
        "sources": [source] if source else [],
        "nccl_version": None, "nccl_version_full": None, "cuda_driver_version": None,
        "nranks": None, "nnodes": None, "hosts": [], "ranks": [],
        "channels": None, "transports": [], "transport_counts": {},
        "rings": [], "trees": [], "net_plugin": None, "net_devices": [], "net_speeds_mbps": {},
        "nvls": {"channels": None, "enabled_env": None, "multicast_supported": None},
        "collnet": {"channels": None, "enabled_env": None},
        "env": {}, "tuning": [], "colls": [], "warnings": [], "info_lines": 0,
    }
    comms: dict[str, dict] = {}  # comm pointer -> {"nranks", "ranks": {rank: info}}
    conns: Counter = Counter()
    hosts: list[str] = []
    last_coll: dict[tuple, dict] = {}  # (host, pid) -> last COLL line, for 2.18 tuning lines without op

    for line in (text or "").splitlines():
        m = _LINE.search(line.rstrip())
        if not m:
            continue
        msg = m["msg"].strip()
        if m["lvl"] == "WARN":
            result["warnings"].append(msg)
            continue
        result["info_lines"] += 1
        host = m["host"]
        if host and host not in hosts:
            hosts.append(host)

        if mm := _VERSION.match(msg):
            result["nccl_version_full"] = mm[1]
            result["nccl_version"] = mm[1].split("+")[0]
        elif mm := _DRIVER.match(msg):
            result["cuda_driver_version"] = int(mm[1])
        elif mm := _CHANNELS.match(msg):
            ch = {k: (int(v) if v is not None else None) for k, v in mm.groupdict().items()}
            result["channels"] = ch
            result["nvls"]["channels"] = ch["nvls"]
            result["collnet"]["channels"] = ch["collnet"]
        elif mm := _CONN.match(msg):
            conns[(int(mm["src"]), int(mm["dst"]), _transport(mm["via"]), mm["dir"] or "send")] += 1
        elif mm := _RING.match(msg):
            result["rings"].append([int(x) for x in mm["order"].split()])
        elif msg.startswith("Trees "):
            result["trees"].append(msg[len("Trees "):])
        elif mm := _NETWORK.match(msg):
            result["net_plugin"] = mm[1]
        elif mm := _NET_SPEED.match(msg):
            result["net_speeds_mbps"][mm["dev"]] = int(mm["mbps"])
        elif mm := _NET_USING.match(msg):
            devs = re.findall(r"\[\d+\](\S+)", mm["devs"])
            result["net_devices"] += [f"{mm['net']}:{d}" for d in devs]
        elif mm := _ENV.match(msg):
            result["env"][mm["name"]] = mm["value"]
        elif mm := _COLL.match(msg):
            dt = int(mm["dt"])
            coll = {"op": mm["op"], "opcount": int(mm["opc"], 16), "count": int(mm["count"]), "datatype": dt,
                    "size_bytes": int(mm["count"]) * DTYPE_BYTES[dt] if dt < len(DTYPE_BYTES) else None,
                    "nranks": int(mm["nranks"])}
            result["colls"].append(coll)
            last_coll[(host, m["pid"])] = coll
        elif mm := _TUNE.match(msg):
            op = mm["op"] or (last_coll.get((host, m["pid"])) or {}).get("op")
            result["tuning"].append({
                "op": op, "size_bytes": int(mm["bytes"]), "algo": _algo(mm["algo"]), "proto": _proto(mm["proto"]),
                "channels": [int(mm["lo"]), int(mm["hi"])] if mm["lo"] is not None else None,
                "time_us": float(mm["time"]) if mm["time"] else None,
            })
        elif msg.startswith("NVLS multicast support is not available"):
            result["nvls"]["multicast_supported"] = False
        elif msg.startswith("NVLS multicast support is available"):
            result["nvls"]["multicast_supported"] = True
        if mm := _RANK.search(msg):
            comm = comms.setdefault(mm["comm"], {"nranks": int(mm["nranks"]), "ranks": {}})
            info = comm["ranks"].setdefault(int(mm["rank"]), {"rank": int(mm["rank"]), "host": host})
            for key, rx in _FIELDS.items():
                if fm := rx.search(msg):
                    info[key] = fm[1] if key == "busId" else int(fm[1])

    if result["info_lines"] == 0:
        where = f" in {source}" if source else ""
        raise ValueError(f"not an NCCL_DEBUG=INFO log{where}: no 'NCCL INFO' lines found")

    result["hosts"] = hosts
    _finish(result, comms, conns)
    return result


def _finish(result: dict, comms: dict, conns: Counter) -> None:
    """Derive nranks/nnodes/ranks/transports from the collected raw facts."""
    if comms:
        world = max(comms.values(), key=lambda c: c["nranks"])  # the largest communicator is the job's world
        result["nranks"] = world["nranks"]
        result["ranks"] = [world["ranks"][r] for r in sorted(world["ranks"])]
        reported = [r.get("nNodes") for c in comms.values() for r in c["ranks"].values() if r.get("nNodes")]
        if reported:
            result["nnodes"] = max(reported)
    if result["nnodes"] is None and len(result["hosts"]) > 1:
        result["nnodes"] = len(result["hosts"])
    result["transports"] = [
        {"src": s, "dst": d, "transport": t, "direction": direction, "count": n}
        for (s, d, t, direction), n in sorted(conns.items())
    ]
    counts: Counter = Counter()
    for (_, _, t, _), n in conns.items():
        counts[t] += n
    result["transport_counts"] = dict(counts)
    env = result["env"]
    result["nvls"]["enabled_env"] = env.get("NCCL_NVLS_ENABLE")
    result["collnet"]["enabled_env"] = env.get("NCCL_COLLNET_ENABLE")


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
    for key in ("rings", "trees", "tuning", "colls", "warnings", "net_devices"):
        out[key] = [x for p in parts for x in p.get(key, [])]
    out["net_speeds_mbps"] = {k: v for p in parts for k, v in p["net_speeds_mbps"].items()}
    out["env"] = {k: v for p in parts for k, v in p["env"].items()}
    versions = sorted({p["nccl_version"] for p in parts if p.get("nccl_version")})
    if len(versions) > 1:
        out["warnings"].append(f"ranks report different NCCL versions: {', '.join(versions)}")
    out["info_lines"] = sum(p["info_lines"] for p in parts)
    out["nvls"] = dict(parts[0]["nvls"])
    out["collnet"] = dict(parts[0]["collnet"])
    for p in parts:
        for k in ("channels", "multicast_supported"):
            if out["nvls"].get(k) is None:
                out["nvls"][k] = p["nvls"].get(k)
        if out["collnet"].get("channels") is None:
            out["collnet"]["channels"] = p["collnet"].get("channels")
    _finish(out, {}, conns)
    return out


def parse_nccl_log_files(paths: Iterable[str | Path]) -> dict:
    """Parse one file per rank (or one combined file) and merge; ValueError names the bad file."""
    parts = []
    for path in paths:
        text = Path(path).read_text(errors="replace")
        parts.append(parse_nccl_log(text, source=str(path)))
    return merge_parsed(parts)


def algo_by_size(parsed: dict) -> list[dict]:
    """Distinct (op, size, algo, proto) choices from TUNING lines, ordered by op then size."""
    seen = {}
    for t in parsed.get("tuning", []):
        key = (t["op"] or "?", t["size_bytes"])
        seen.setdefault(key, {"op": t["op"], "size_bytes": t["size_bytes"], "algo": t["algo"], "proto": t["proto"]})
    return [seen[k] for k in sorted(seen)]


def describe_algo_ranges(rows: list[dict]) -> str:
    """Contiguous size ranges with one algo/proto, e.g. "1 MiB: Ring/LL, 2 MiB+: Ring/Simple"."""
    by_op: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r.get("op") or "", r["size_bytes"])):
        by_op.setdefault(r.get("op") or "?", []).append(r)
    parts = []
    for op, op_rows in by_op.items():
        runs: list[list[dict]] = []
        for r in op_rows:
            if runs and (runs[-1][-1]["algo"], runs[-1][-1]["proto"]) == (r["algo"], r["proto"]):
                runs[-1].append(r)
            else:
                runs.append([r])
        pieces = []
        for i, run in enumerate(runs):
            lo, hi = human_bytes(run[0]["size_bytes"]), human_bytes(run[-1]["size_bytes"])
            if i == len(runs) - 1 and len(runs) > 1:
                span = f"{lo}+"
            else:
                span = lo if lo == hi else f"{lo}–{hi}"
            pieces.append(f"{span}: {run[0]['algo']}/{run[0]['proto']}")
        text = ", ".join(pieces)
        parts.append(f"{op}: {text}" if len(by_op) > 1 else text)
    return "; ".join(parts)
