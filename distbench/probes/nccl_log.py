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

Logs also arrive pasted from a chat: several processes interleaved (each line tagged host:pid:tid
[cudaDev], often behind an srun/torchrun prefix), so ranks are grouped by communicator (NCCL's
commId, not the comm pointer, which repeats across processes). Per communicator the result has the
rank -> host/pid/GPU/busId map, whether each rank reached "Init COMPLETE" (a rank that started and
never finished is a finding, listed under "findings" and "warnings"), its init/bootstrap timings
and CPU affinity. NVLS and CollNet setup lines, the GPUDirect RDMA flag and NIC index of each NET
connection, NCCL's tuning-model table and its path matrix are kept too (formats next to the regexes).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from distbench.core.sizes import human_bytes

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


# --- Lines the issue-13 additions read (formats from NCCL 2.18-2.28 INFO() strings) ---------------------
# init.cc: "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx [parent %p color %d key %d]
#           commId 0x%llx - Init START" (the same with "- Init COMPLETE")
_COMM_ID = re.compile(r"\bcomm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)\b"
                      r".*?\bcommId (?P<id>0x[0-9a-f]+)")
_INIT_STATE = re.compile(r"- Init (?P<state>START|COMPLETE)\b")
# 2.23+ init.cc / bootstrap.cc: "Init timings - %s: rank %d nranks %d total %.2f (kernels %.2f, alloc %.2f, ...)"
#                               "Bootstrap timings total %f (create %f, send %f, recv %f, ring %f, delay %f)"
_TIMINGS = re.compile(r"^(?P<what>Init|Bootstrap) timings(?: - (?P<fn>\w+):)?"
                      r"(?: rank (?P<rank>\d+) nranks (?P<nranks>\d+))? total (?P<total>[\d.]+) \((?P<parts>[^)]*)\)")
# graph/topo.cc (init.cc before 2.19): "Setting affinity for GPU %d to %s"; and the newer notice that the GPU's
# NUMA mask was empty, so the process keeps its own mask.
_AFFINITY_SET = re.compile(r"^Setting affinity for GPU (?P<gpu>\d+) to (?P<mask>\S+)")
_AFFINITY_EMPTY = re.compile(r"Affinity for GPU (?P<gpu>\d+) is empty, ignoring\. "
                             r"\(GPU affinity = (?P<gpu_mask>[^;]*?) ?; CPU affinity = (?P<cpu_mask>[^)]*?)\)")
# net.cc: "... via NET/%s/%d%s%s" with "(%d)" after the device for a PXN proxy rank, then "/GDRDMA", "/Shared".
_NET_VIA = re.compile(r"^NET/(?P<net>[^/(]+)/(?P<nic>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>(?:/[A-Za-z]+)*)$")
# coll_net.cc: "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s" (the %s after the device is "/GDRDMA" or "")
_COLLNET_CONN = re.compile(r"^CollNet (?P<ch>\d+)/(?P<conn>\d+) : (?P<rank>\d+) \[(?P<dir>send|receive)\] "
                           r"via COLLNET/(?P<plugin>[^/]+)/(?P<nic>\d+)(?P<flags>(?:/[A-Za-z]+)*)\s*$")
_COLLNET_CONNECTED = re.compile(r"^(?:rank \d+ )?Connected CollNet\b")
_NVLS_CONNECTED = re.compile(r"^Connected NVLS\b", re.IGNORECASE)
_NVLS_MULTICAST = re.compile(r"^NVLS multicast support is (?P<not>not )?available(?: on dev (?P<dev>\d+))?")
# transport/nvls.cc: "NVLS comm %p headRank %d nHeads %d buffSize %zu memSize %zu nvlsPerRankSize %zu nvlsTotalSize %zu"
_NVLS_COMM = re.compile(r"^NVLS comm (?P<comm>0x[0-9a-f]+) headRank (?P<head_rank>-?\d+) nHeads (?P<n_heads>\d+)"
                        r"(?: buffSize (?P<buff_size>\d+))?(?: memSize (?P<mem_size>\d+))?"
                        r"(?: nvlsPerRankSize (?P<per_rank_size>\d+))?(?: nvlsTotalSize (?P<total_size>\d+))?")
# net_ib.cc "NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no module)"; graph/paths.cc
# "GPU Direct RDMA Enabled for GPU %lx / HCA %d (distance %d <= %d), read %d mode %s".
_GDR_CHECK = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU (?P<gpu>\S+) / )?"
                        r"HCA (?P<hca>\S+)\s*(?P<rest>.*)$")
# graph/tuning.cc prints the tuning model (rank 0 only) as "|"-separated blocks: "Algorithm", "Protocol",
# "Max NThreads", then one "latency/bandwidth" row per collective.
_TABLE_CELL = re.compile(r"^\s*(?P<lat>[\d.]+)/\s*(?P<bw>[\d.]+)\s*$")
# graph/paths.cc path dump: "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) ..." (hops/bandwidth/type).
_PATH_NODE = r"[A-Z]+/[0-9A-Fa-fx:.-]+"
_PATH_LINE = re.compile(rf"^(?P<src>{_PATH_NODE}) :(?P<rest>(?:\s*{_PATH_NODE} \(\d+/[\d.]+/[A-Z]+\))+)\s*$")
_PATH_ENTRY = re.compile(rf"(?P<dst>{_PATH_NODE}) \((?P<hops>\d+)/(?P<bw>[\d.]+)/(?P<type>[A-Z]+)\)")

# Keys of the original per-rank record in result["ranks"]; the richer record lives in "communicators".
_RANK_KEYS = ("rank", "host", "cudaDev", "nvmlDev", "busId", "nNodes", "localRanks", "localRank")
_INIT_ORDER = {None: 0, "started": 1, "complete": 2}


@dataclass
class _Comm:
    """One communicator: every rank's record, keyed by rank; comm_id is NCCL's commId hash when logged."""
    comm_id: str | None
    nranks: int
    ranks: dict[int, dict] = field(default_factory=dict)


@dataclass
class _State:
    """What one parse collects before _finish turns it into the result's keys."""
    comm_ids: dict[tuple, str]                                        # (host, pid, pointer) -> commId
    comms: dict[str, _Comm] = field(default_factory=dict)             # commId (or host:pid:pointer) -> _Comm
    by_pointer: dict[tuple, tuple[str, int]] = field(default_factory=dict)  # (host, pid, pointer) -> (key, rank)
    recent: dict[tuple, list[tuple[str, int]]] = field(default_factory=dict)  # (host, pid) -> comms it touched
    conns: Counter = field(default_factory=Counter)
    net_connections: list[dict] = field(default_factory=list)
    net_names: dict[tuple, str] = field(default_factory=dict)         # (net plugin, device index) -> device name
    affinity: dict[tuple, dict] = field(default_factory=dict)         # (host, pid, cudaDev) -> affinity fields
    tables: dict[tuple, dict] = field(default_factory=dict)           # (host, pid, comm key) -> tuning table
    table_head: dict[tuple, dict] = field(default_factory=dict)       # (host, pid) -> current block's columns


def _proc(host, pid) -> tuple:
    return (host, int(pid) if pid else None)


def _scan_comm_ids(text: str) -> dict[tuple, str]:
    """First pass: commId per (host, pid, comm pointer), so lines logged before Init START (or in a paste
    that lost it) still land in the right communicator. Pointers repeat across processes and hosts."""
    ids = {}
    for line in text.splitlines():
        m = _LINE.search(line.rstrip())
        if m and (mm := _COMM_ID.search(m["msg"])):
            ids[(*_proc(m["host"], m["pid"]), mm["comm"])] = mm["id"]
    return ids


def _rank_record(st: _State, proc: tuple, mm: re.Match) -> tuple[str, dict]:
    """The record of the rank a "comm %p rank %d nranks %d ..." line speaks of, created on first sight."""
    pointer, rank, nranks = mm["comm"], int(mm["rank"]), int(mm["nranks"])
    comm_id = st.comm_ids.get((*proc, pointer))
    key = comm_id or f"{proc[0]}:{proc[1]}:{pointer}"
    comm = st.comms.setdefault(key, _Comm(comm_id, nranks))
    info = comm.ranks.setdefault(rank, {
        "rank": rank, "host": proc[0], "pid": proc[1], "comm": pointer, "init": None, "init_timings": None,
        "bootstrap_timings": None, "cpu_affinity": None, "process_cpu_affinity": None, "nvls_head": None,
        "nvls_connected": False, "collnet_connected": False})
    st.by_pointer[(*proc, pointer)] = (key, rank)
    touched = st.recent.setdefault(proc, [])
    if not touched or touched[-1] != (key, rank):
        touched.append((key, rank))
    return key, info


def _current_rank(st: _State, proc: tuple, rank: int | None = None, nranks: int | None = None) -> dict | None:
    """The rank record a process spoke of last (optionally with this rank/nranks): lines such as
    "Init timings" or "Connected NVLS Tree" name no communicator, but follow that one's init lines."""
    for key, r in reversed(st.recent.get(proc, [])):
        comm = st.comms[key]
        if (rank is None or r == rank) and (nranks is None or comm.nranks == nranks):
            return comm.ranks[r]
    return None


def _timings(mm: re.Match) -> dict:
    parts = {}
    for piece in mm["parts"].split(","):
        name, _, value = piece.strip().partition(" ")
        if name and value:
            parts[name] = float(value)
    return {"total_s": float(mm["total"]), **{f"{k}_s": v for k, v in parts.items()}}


def _net_connection(mm: re.Match, proc: tuple, st: _State) -> dict | None:
    """One NET connection with its NIC index, PXN proxy rank and the GDRDMA/Shared flags kept."""
    via = _NET_VIA.match(mm["via"])
    if not via:
        return None
    flags = [f for f in via["flags"].split("/") if f]
    cur = _current_rank(st, proc)
    return {
        "channel": int(mm["ch"]), "conn": int(mm["conn"]) if mm["conn"] is not None else None,
        "src": int(mm["src"]), "dst": int(mm["dst"]), "direction": mm["dir"] or "send",
        "net": via["net"], "nic": int(via["nic"]), "nic_name": None,
        "proxy_rank": int(via["proxy"]) if via["proxy"] else None,
        "gdrdma": "GDRDMA" in flags, "shared": "Shared" in flags,
        "host": proc[0], "pid": proc[1], "comm_id": _comm_id_of(st, cur),
    }


def _comm_id_of(st: _State, record: dict | None) -> str | None:
    if record is None:
        return None
    key, _ = st.by_pointer.get((record["host"], record["pid"], record["comm"]), (None, None))
    return st.comms[key].comm_id if key else None


def _table_line(st: _State, proc: tuple, msg: str) -> bool:
    """Read one line of the tuning model table; False when the line is not part of one."""
    if "|" not in msg:
        return False
    cells = [c.strip() for c in msg.split("|")]
    label, values = cells[0], [c for c in cells[1:] if c != ""]
    if label == "Algorithm":
        st.table_head[proc] = {"algos": values, "protos": [], "threads": []}
        return True
    head = st.table_head.get(proc)
    if head is None:
        return False
    if label == "Protocol":
        head["protos"] = values
        return True
    if label == "Max NThreads":
        head["threads"] = [int(v) if v.isdigit() else None for v in values]
        return True
    if not re.fullmatch(r"[A-Za-z]+", label) or not values or not all(_TABLE_CELL.match(v) for v in values):
        return False
    cur = _current_rank(st, proc)
    key = (*proc, _comm_id_of(st, cur))
    table = st.tables.setdefault(key, {"host": proc[0], "pid": proc[1], "comm_id": key[2],
                                       "rank": cur["rank"] if cur else None, "entries": []})
    per_algo = len(PROTO_NAMES)  # each algorithm spans one column per protocol
    for j, v in enumerate(values):
        if j // per_algo >= len(head["algos"]) or j >= len(head["protos"]):
            break  # the last block (PAT alone in 2.23+) repeats protocol names past its one algorithm
        cell = _TABLE_CELL.match(v)
        table["entries"].append({
            "op": label, "algo": _algo(head["algos"][j // per_algo]), "proto": _proto(head["protos"][j]),
            "latency_us": float(cell["lat"]), "bw_gbps": float(cell["bw"]),
            "max_threads": head["threads"][j] if j < len(head["threads"]) else None})
    return True


def _special_line(st: _State, proc: tuple, msg: str, result: dict) -> bool:
    """The issue-13 line kinds (timings, affinity, NVLS, CollNet, GDR checks, NCCL's path matrix, tuning
    table); False when the line is none of them."""
    if mm := _TIMINGS.match(msg):
        nranks = int(mm["nranks"]) if mm["nranks"] else None
        rec = _current_rank(st, proc, int(mm["rank"]) if mm["rank"] else None, nranks)
        if rec is not None:
            rec["init_timings" if mm["what"] == "Init" else "bootstrap_timings"] = _timings(mm)
    elif mm := _AFFINITY_SET.match(msg):
        st.affinity.setdefault((*proc, int(mm["gpu"])), {})["cpu_affinity"] = mm["mask"]
    elif mm := _AFFINITY_EMPTY.search(msg):
        st.affinity.setdefault((*proc, int(mm["gpu"])), {})["process_cpu_affinity"] = mm["cpu_mask"].strip() or None
    elif mm := _NVLS_COMM.match(msg):
        key, rank = st.by_pointer.get((*proc, mm["comm"]), (None, None))
        head = {k: int(v) for k, v in mm.groupdict().items() if k != "comm" and v is not None}
        if key is not None:
            st.comms[key].ranks[rank]["nvls_head"] = head
    elif _NVLS_CONNECTED.match(msg):
        result["nvls_detail"]["connected"] = True
        if rec := _current_rank(st, proc):
            rec["nvls_connected"] = True
    elif mm := _COLLNET_CONN.match(msg):
        flags = [f for f in mm["flags"].split("/") if f]
        result["collnet_detail"]["connections"].append({
            "channel": int(mm["ch"]), "conn": int(mm["conn"]), "rank": int(mm["rank"]), "direction": mm["dir"],
            "plugin": mm["plugin"], "nic": int(mm["nic"]), "gdrdma": "GDRDMA" in flags,
            "host": proc[0], "pid": proc[1], "comm_id": _comm_id_of(st, _current_rank(st, proc))})
    elif _COLLNET_CONNECTED.match(msg):
        result["collnet_detail"]["connected"] = True
        if rec := _current_rank(st, proc):
            rec["collnet_connected"] = True
    elif mm := _GDR_CHECK.search(msg):
        result["gdrdma"]["checks"].append({"host": proc[0], "gpu": mm["gpu"], "hca": mm["hca"].strip("'"),
                                           "enabled": mm["state"] == "Enabled", "detail": mm["rest"].strip()})
    elif mm := _PATH_LINE.match(msg):
        paths = result["nccl_paths"].setdefault(proc[0] or "?", {})
        if mm["src"] not in paths:  # every rank of a host prints the same matrix; keep the first
            paths[mm["src"]] = {e["dst"]: {"hops": int(e["hops"]), "bw_gbps": float(e["bw"]), "type": e["type"]}
                                for e in _PATH_ENTRY.finditer(mm["rest"])}
    elif not _table_line(st, proc, msg):
        return False
    return True


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
    """Parse one NCCL INFO log (one rank's, or several processes interleaved). Raises ValueError when it
    holds no NCCL INFO lines."""
    text = (text or "").replace("\r", "")
    result: dict = {
        "sources": [source] if source else [],
        "nccl_version": None, "nccl_version_full": None, "cuda_driver_version": None,
        "nranks": None, "nnodes": None, "hosts": [], "ranks": [],
        "channels": None, "transports": [], "transport_counts": {},
        "rings": [], "trees": [], "net_plugin": None, "net_devices": [], "net_speeds_mbps": {},
        "nvls": {"channels": None, "enabled_env": None, "multicast_supported": None},
        "collnet": {"channels": None, "enabled_env": None},
        "env": {}, "tuning": [], "colls": [], "warnings": [], "info_lines": 0,
        # issue 13: see the module docstring
        "warn_lines": [], "findings": [], "communicators": [], "net_connections": [],
        "gdrdma": {"checks": []}, "nvls_detail": {"connected": False, "multicast": []},
        "collnet_detail": {"connected": False, "connections": []}, "transport_families": [],
        "tuning_tables": [], "nccl_paths": {},
    }
    st = _State(comm_ids=_scan_comm_ids(text))
    hosts: list[str] = []
    last_coll: dict[tuple, dict] = {}  # (host, pid) -> last COLL line, for 2.18 tuning lines without op

    for line in text.splitlines():
        m = _LINE.search(line.rstrip())
        if not m:
            continue
        msg = m["msg"].strip()
        if m["lvl"] == "WARN":
            result["warn_lines"].append(msg)
            continue
        result["info_lines"] += 1
        host = m["host"]
        proc = _proc(host, m["pid"])
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
            st.conns[(int(mm["src"]), int(mm["dst"]), _transport(mm["via"]), mm["dir"] or "send")] += 1
            if conn := _net_connection(mm, proc, st):
                st.net_connections.append(conn)
        elif mm := _RING.match(msg):
            result["rings"].append([int(x) for x in mm["order"].split()])
        elif msg.startswith("Trees "):
            result["trees"].append(msg[len("Trees "):])
        elif mm := _NETWORK.match(msg):
            result["net_plugin"] = mm[1]
        elif mm := _NET_SPEED.match(msg):
            result["net_speeds_mbps"][mm["dev"]] = int(mm["mbps"])
        elif mm := _NET_USING.match(msg):
            devs = re.findall(r"\[(\d+)\](\S+)", mm["devs"])
            result["net_devices"] += [f"{mm['net']}:{d}" for _, d in devs]
            st.net_names.update({(mm["net"], int(i)): d for i, d in devs})
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
        elif mm := _NVLS_MULTICAST.match(msg):
            result["nvls"]["multicast_supported"] = mm["not"] is None
            result["nvls_detail"]["multicast"].append({"host": proc[0], "pid": proc[1],
                                                       "dev": int(mm["dev"]) if mm["dev"] else None,
                                                       "available": mm["not"] is None})
        else:
            _special_line(st, proc, msg, result)
        if mm := _RANK.search(msg):
            _, info = _rank_record(st, proc, mm)
            for key, rx in _FIELDS.items():
                if fm := rx.search(msg):
                    info[key] = fm[1] if key == "busId" else int(fm[1])
            if im := _INIT_STATE.search(msg):
                state = "complete" if im["state"] == "COMPLETE" else "started"
                if _INIT_ORDER[state] > _INIT_ORDER[info["init"]]:
                    info["init"] = state

    if result["info_lines"] == 0:
        where = f" in {source}" if source else ""
        raise ValueError(f"not an NCCL_DEBUG=INFO log{where}: no 'NCCL INFO' lines found")

    result["hosts"] = hosts
    _apply_affinity(st)
    result["net_connections"] = [
        {**c, "nic_name": _nic_name(st.net_names, c["net"], c["nic"])} for c in st.net_connections]
    result["tuning_tables"] = list(st.tables.values())
    _world_ranks(result, st.comms)
    _finish(result, st.comms, st.conns)
    return result


def _apply_affinity(st: _State) -> None:
    """Affinity lines name the process's CUDA device, not the rank: copy them to every rank of that GPU."""
    for comm in st.comms.values():
        for rec in comm.ranks.values():
            found = st.affinity.get((rec["host"], rec["pid"], rec.get("cudaDev")))
            if found:
                rec.update(found)


def _world_ranks(result: dict, comms: dict[str, _Comm]) -> None:
    """nranks, ranks and nnodes from the largest communicator (the job's world)."""
    if comms:
        # Ties (a per-rank file sees one rank of each communicator) go to the one with most ranks seen.
        world = max(comms.values(), key=lambda c: (c.nranks, len(c.ranks)))
        result["nranks"] = world.nranks
        result["ranks"] = [_old_rank(world.ranks[r]) for r in sorted(world.ranks)]
        reported = [r.get("nNodes") for c in comms.values() for r in c.ranks.values() if r.get("nNodes")]
        if reported:
            result["nnodes"] = max(reported)
    if result["nnodes"] is None and len(result["hosts"]) > 1:
        result["nnodes"] = len(result["hosts"])


def _old_rank(rec: dict) -> dict:
    return {k: rec[k] for k in _RANK_KEYS if k in rec}


def _finish(result: dict, comms: dict[str, _Comm], conns: Counter, findings: list[str] | None = None) -> None:
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


def _communicators(comms: dict[str, _Comm]) -> tuple[list[dict], list[str]]:
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


def _init_finding(comm: _Comm, stuck: list[int], missing: list[int], n_complete: int) -> str:
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


def _nic_name(net_names: dict[tuple, str], net: str, nic: int) -> str | None:
    """The device behind NET/<net>/<nic>; external plugins (IBext_v8) list their devices as NET/IB."""
    if (net, nic) in net_names:
        return net_names[(net, nic)]
    return next((name for (n, i), name in net_names.items() if i == nic and net.startswith(n)), None)


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
            out[k] = v if _INIT_ORDER[v] > _INIT_ORDER[old.get(k)] else old.get(k)
        elif out.get(k) in (None, False):
            out[k] = v
    return out


def _merged_comms(parts: list[dict]) -> dict[str, _Comm]:
    """Communicators of several parses joined by commId (one file per rank shows one rank of each)."""
    comms: dict[str, _Comm] = {}
    for i, p in enumerate(parts):
        for j, c in enumerate(p.get("communicators", [])):
            key = c["comm_id"] or f"part{i}:{j}"  # without a commId, a communicator is one process's
            comm = comms.setdefault(key, _Comm(c["comm_id"], c["nranks"]))
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
    _finish(out, _merged_comms(parts), conns, findings)
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
