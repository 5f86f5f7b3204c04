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

This module reads the lines; nccl_comms derives the per-communicator view and findings and merges
per-rank files, nccl_algo spells algorithm/protocol names and summarises the choices per size.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from distbench.probes.nccl_algo import PROTO_NAMES, algo_name, proto_name
from distbench.probes.nccl_comms import INIT_ORDER, Comm, finish_result, merge_parsed

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


@dataclass
class _State:
    """What one parse collects before finish_result turns it into the result's keys."""
    comm_ids: dict[tuple, str]                                        # (host, pid, pointer) -> commId
    comms: dict[str, Comm] = field(default_factory=dict)             # commId (or host:pid:pointer) -> Comm
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
    comm = st.comms.setdefault(key, Comm(comm_id, nranks))
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
            "op": label, "algo": algo_name(head["algos"][j // per_algo]), "proto": proto_name(head["protos"][j]),
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
        # findings, communicators and setup details: see the module docstring
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
                "op": op, "size_bytes": int(mm["bytes"]), "algo": algo_name(mm["algo"]), "proto": proto_name(mm["proto"]),
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
                if INIT_ORDER[state] > INIT_ORDER[info["init"]]:
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
    finish_result(result, st.comms, st.conns)
    return result


def _apply_affinity(st: _State) -> None:
    """Affinity lines name the process's CUDA device, not the rank: copy them to every rank of that GPU."""
    for comm in st.comms.values():
        for rec in comm.ranks.values():
            found = st.affinity.get((rec["host"], rec["pid"], rec.get("cudaDev")))
            if found:
                rec.update(found)


def _world_ranks(result: dict, comms: dict[str, Comm]) -> None:
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


def _nic_name(net_names: dict[tuple, str], net: str, nic: int) -> str | None:
    """The device behind NET/<net>/<nic>; external plugins (IBext_v8) list their devices as NET/IB."""
    if (net, nic) in net_names:
        return net_names[(net, nic)]
    return next((name for (n, i), name in net_names.items() if i == nic and net.startswith(n)), None)


def parse_nccl_log_files(paths: Iterable[str | Path]) -> dict:
    """Parse one file per rank (or one combined file) and merge; ValueError names the bad file."""
    parts = []
    for path in paths:
        text = Path(path).read_text(errors="replace")
        parts.append(parse_nccl_log(text, source=str(path)))
    return merge_parsed(parts)
