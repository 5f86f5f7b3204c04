"""The transport NCCL used between this node's GPUs, beside what the hardware offers, and the NCCL_*
variables that can force a slower one (torch-free).

A misconfigured environment (a container image, a module file, a prolog's exports, /etc/nccl.conf) is
a common cause of a slow node: NCCL_P2P_DISABLE=1 on a 2x H200 node made all_reduce run at 27.5 GB/s
instead of ~326, over SHM through host memory where NVLink (NV18) joins the GPUs. The links were fine.

What NCCL did is read from its own account: the gate's comm check runs with NCCL_DEBUG=INFO and
NCCL_DEBUG_SUBSYS=INIT,ENV into one file per rank (NCCL_DEBUG_FILE with %h.%p), parsed by
distbench.probes.nccl_log: its connection lines (src/transport/p2p.cc "... via P2P/%s", shm.cc "... via
SHM/%s/%s", net.cc "... via NET/%s/%d"), its ranks' NVML devices, and the variables it says it took
("NCCL_P2P_DISABLE set by environment to 1.", src/misc/param.cc; this includes those of /etc/nccl.conf
and ~/.nccl.conf, which NCCL loads into its environment). What the hardware offers is `nvidia-smi topo
-m` (distbench.probes.topology: NV# is a bonded set of NVLinks) with NVML's NVLink state
(distbench.probes.nvml: a GPU whose links are all down does not offer them, whatever topo says).

Slower than offered: SHM or NET between two GPUs that NVLink joins (NCCL's P2P transport is the one
that uses NVLink), or NET between two GPUs of one host (SHM through host memory is always there).
P2P between GPUs that only PCIe joins is not judged (NCCL's own P2P level and the platform's peer
access decide it, not a setting to blame).

FORCERS lists each variable that can force such a path, with the values that do, from NCCL's
environment variables page (ENV_DOCS, anchors per variable). Variables that change NCCL's
algorithm, protocol, channels or P2P flavour but never the transport family are in NOT_FORCERS:
they are never named by a transport finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
# what the gate's comm check runs with so that NCCL writes its own account (distbench.gate.check)
DEBUG_SUBSYS = "INIT,ENV"  # INIT: the "Channel .. via P2P|SHM|NET" lines; ENV: "... set by environment to ..."
LOG_DIR = "gate_nccl"  # under the gate's --out directory
LOG_PATTERN = "nccl.%h.%p.log"  # NCCL_DEBUG_FILE: %h host, %p pid: one file per rank
FAMILIES = ("P2P", "SHM", "NET")


def _int_is(target: int) -> Callable[[str], bool]:
    """NCCL reads these with strtol/strtoll base 0 and tests == target (p2p level, ncclParamShmDisable)."""
    def test(value: str) -> bool:
        try:
            return int(value.strip(), 0) == target
        except ValueError:
            return False
    return test


def _nonzero(value: str) -> bool:
    try:
        return int(value.strip(), 0) != 0
    except ValueError:
        return False


def _p2p_level_off(value: str) -> bool:
    return value.strip().upper() in ("LOC", "0")


@dataclass(frozen=True)
class Forcer:
    name: str
    forces: tuple[str, ...]  # the transports (family, or family/plugin) it can force between GPUs of one node
    when: Callable[[str], bool]  # the values that do
    does: str  # what it does, in words (NCCL's docs)
    anchor: str  # on ENV_DOCS

    @property
    def url(self) -> str:
        return f"{ENV_DOCS}#{self.anchor}"


FORCERS = (
    Forcer("NCCL_P2P_DISABLE", ("SHM", "NET"), _int_is(1),
           "1 disables the P2P transport (CUDA direct access between GPUs over NVLink or PCIe)", "nccl-p2p-disable"),
    Forcer("NCCL_P2P_LEVEL", ("SHM", "NET"), _p2p_level_off,
           "LOC (0) never uses P2P; NVL and wider levels keep it over NVLink", "nccl-p2p-level"),
    Forcer("NCCL_SHM_DISABLE", ("NET",), _int_is(1),
           "1 disables the SHM transport: where P2P cannot happen, GPUs of one node then use the network",
           "nccl-shm-disable"),
    Forcer("NCCL_TOPO_FILE", ("SHM", "NET"), lambda v: bool(v.strip()),
           "a topology file NCCL loads instead of detecting the node's: one without the NVLinks hides them",
           "nccl-topo-file"),
    Forcer("NCCL_IB_DISABLE", ("NET/Socket",), _nonzero,
           "1 stops NCCL using InfiniBand/RoCE: its network transport is then IP sockets", "nccl-ib-disable"),
    Forcer("NCCL_NET", ("NET/Socket",), lambda v: v.strip().lower() == "socket",
           "names the network NCCL uses: Socket is IP sockets", "nccl-net"),
)
FORCER = {f.name: f for f in FORCERS}

# Set, they change how NCCL uses a transport, never which one: never named by a transport finding.
NOT_FORCERS = {
    "NCCL_NVLS_ENABLE": "NVLink SHARP on NVSwitch systems (an algorithm over P2P's NVLink, not a transport)",
    "NCCL_ALGO": "the algorithms NCCL may use (ring, tree, NVLS, ...)",
    "NCCL_PROTO": "the protocols NCCL may use (LL, LL128, Simple)",
    "NCCL_P2P_USE_CUDA_MEMCPY": "P2P through the copy engines: still P2P",
    "NCCL_CUMEM_ENABLE": "how P2P buffers are allocated and shared (CUMEM or IPC): still P2P",
    "NCCL_P2P_DIRECT_DISABLE": "no direct pointers between GPUs of one process: P2P through IPC instead",
    "NCCL_P2P_READ_ENABLE": "P2P read instead of write: still P2P",
    "NCCL_SHM_USE_CUDA_MEMCPY": "how SHM copies, once SHM is used",
    "NCCL_MIN_NCHANNELS": "channels, not transports",
    "NCCL_MAX_NCHANNELS": "channels, not transports",
    "NCCL_GRAPH_MIXING_SUPPORT": "CUDA-graph mixing (the gate sets it to 0 itself)",
}


def family(transport: str) -> str:
    return transport.split("/")[0]


# ----------------------------------------------------------------------------------- NCCL's account
def log_files(directory: Path) -> list[Path]:
    """The per-rank NCCL logs the comm check wrote (LOG_PATTERN) in `directory`."""
    return sorted(p for p in Path(directory).glob("nccl.*.log") if p.is_file())


def read_logs(paths) -> dict:
    """NCCL's account of the collective, compact for readings.json: {"available", "transports":
    [{src, dst, transport}] (ranks), "ranks": {rank: {host, nvmlDev, cudaDev}}, "env": {NAME: value},
    "version", "files", "unreadable"}; {"available": False, "reason"} when no file holds NCCL INFO lines."""
    from distbench.probes.nccl_log import parse_nccl_log
    from distbench.probes.nccl_comms import merge_parsed

    parts, unreadable = [], []
    for path in paths:
        try:
            parts.append(parse_nccl_log(Path(path).read_text(errors="replace"), source=str(path)))
        except (OSError, ValueError) as e:
            unreadable.append(f"{Path(path).name}: {' '.join(str(e).split())[:160]}")
    if not parts:
        why = "; ".join(unreadable) if unreadable else "NCCL wrote no log (NCCL_DEBUG_FILE)"
        return {"available": False, "reason": why, "files": [str(p) for p in paths]}
    parsed = merge_parsed(parts)
    ranks = {}
    for comm in parsed.get("communicators") or []:
        for r in comm.get("ranks") or []:
            if isinstance(r, dict) and "rank" in r:
                ranks.setdefault(str(r["rank"]), {k: r.get(k) for k in ("host", "nvmlDev", "cudaDev")})
    for r in parsed.get("ranks") or []:
        ranks.setdefault(str(r["rank"]), {k: r.get(k) for k in ("host", "nvmlDev", "cudaDev")})
    seen = {}
    for t in parsed.get("transports") or []:
        seen.setdefault((t["src"], t["dst"], t["transport"]), 0)
        seen[(t["src"], t["dst"], t["transport"])] += int(t.get("count") or 1)
    return {"available": True, "version": parsed.get("nccl_version"), "nnodes": parsed.get("nnodes"),
            "transports": [{"src": s, "dst": d, "transport": t, "count": n} for (s, d, t), n in sorted(seen.items())],
            "ranks": ranks, "env": dict(parsed.get("env") or {}), "files": [str(p) for p in paths],
            "unreadable": unreadable}


def compact_topology(topo: dict | None) -> dict:
    """What readings.json keeps of distbench.probes.topology.probe_topology(): its GPU links."""
    if not topo or not topo.get("available", True) or "links" not in topo:
        return {"available": False, "reason": (topo or {}).get("reason", "not probed")}
    return {"available": True, "links": [{k: link.get(k) for k in ("a", "b", "type", "nvlinks", "raw")}
                                         for link in topo["links"]]}


def compact_nvlink(nv: dict | None) -> dict:
    """What readings.json keeps of distbench.probes.nvml.nvlink_state(): active/total links per GPU."""
    if not nv or not nv.get("available"):
        return {"available": False, "reason": (nv or {}).get("reason", "not read")}
    return {"available": True, "gpus": {str(g["index"]): [g.get("nvlink_active"), g.get("nvlink_total")]
                                        for g in nv.get("gpus", [])}}


def nccl_environment(env) -> dict:
    """The NCCL_* variables of an environment (the gate's own: what every job on the node inherits)."""
    return {k: v for k, v in env.items() if k.startswith("NCCL_")}


# ------------------------------------------------------------------------------------------- finding
@dataclass(frozen=True)
class Finding:
    transport: str  # what NCCL used: SHM, NET/Socket, NET/IB
    pairs: tuple[tuple[int, int], ...]  # NVML indices
    offered: str  # what the hardware offers, in words: "NVLink (NV18)"
    variables: tuple[tuple[str, str, str], ...]  # (name, value, where it was set)
    text: str


def _gpu_of(nccl: dict, rank: int) -> int:
    """A rank's GPU by NVML index (NCCL's nvmlDev), else its CUDA device, else the rank itself (the comm
    job puts rank r on device r)."""
    r = (nccl.get("ranks") or {}).get(str(rank)) or {}
    for key in ("nvmlDev", "cudaDev"):
        if isinstance(r.get(key), int):
            return r[key]
    return rank


def _host_of(nccl: dict, rank: int):
    return ((nccl.get("ranks") or {}).get(str(rank)) or {}).get("host")


def _link(topology: dict | None, a: int, b: int) -> dict | None:
    for link in (topology or {}).get("links") or []:
        if {link.get("a"), link.get("b")} == {f"GPU{a}", f"GPU{b}"}:
            return link
    return None


def _nvlink_up(nvlink: dict | None, gpu: int) -> bool:
    """NVML's word on a GPU's NVLinks: False only when it has links and none is active."""
    if not nvlink or not nvlink.get("available"):
        return True
    active, total = (nvlink.get("gpus") or {}).get(str(gpu), [None, None])
    return not (total and not active)


def offered_path(topology: dict | None, nvlink: dict | None, a: int, b: int) -> tuple[str | None, str]:
    """(the faster transport family the hardware offers between GPUs a and b, in words) or (None, ...)."""
    link = _link(topology, a, b)
    if link and link.get("type") == "NV" and _nvlink_up(nvlink, a) and _nvlink_up(nvlink, b):
        return "P2P", f"NVLink ({link.get('raw') or 'NV%d' % link.get('nvlinks', 0)})"
    kind = f"PCIe ({link['raw']})" if link and link.get("raw") else "one host"
    return "SHM", kind


def _slower(used: str, offer: str | None) -> bool:
    rank = {"P2P": 0, "SHM": 1, "NET": 2}
    return offer is not None and rank.get(family(used), -1) > rank[offer]


def forcing(transport: str, env: dict, nccl_env: dict) -> list[tuple[str, str, str]]:
    """Every variable set (the gate's environment first, then what NCCL says it took) that can force
    `transport` between GPUs of one node, with its value and where it was set."""
    out = []
    for f in FORCERS:
        if not any(transport == t or (transport.startswith("NET") and t == "NET") for t in f.forces):
            continue
        if f.name in env:
            value, where = env[f.name], "in the environment"
        elif f.name in nccl_env:
            value, where = nccl_env[f.name], "(NCCL took it from /etc/nccl.conf or ~/.nccl.conf: not in the environment)"
        else:
            continue
        if f.when(str(value)):
            out.append((f.name, str(value), where))
    return out


def _pairs_text(pairs) -> str:
    shown = ", ".join(f"GPU{a} and GPU{b}" for a, b in pairs[:3])
    return shown + (f" (+{len(pairs) - 3} more pairs)" if len(pairs) > 3 else "")


def _variables_text(variables) -> str:
    if not variables:
        return ("no NCCL_* variable that can force it is set (look at P2P access between the GPUs: the driver, "
                "the container's IPC, nvidia-smi topo -p2p r)")
    by_where: dict[str, list[str]] = {}
    for name, value, where in variables:
        by_where.setdefault(where, []).append(f"{name}={value}")
    said = "; ".join(f"{' and '.join(names)} {where}" for where, names in by_where.items())
    verb = "forces" if len(variables) == 1 else "force"
    return f"{said} {verb} it"


def findings(nccl: dict | None, topology: dict | None, nvlink: dict | None, env: dict) -> list[Finding]:
    """Where NCCL used a slower transport than the hardware offers: per (transport, offered path), the
    GPU pairs and the variables that can force it (see the module docstring)."""
    if not nccl or not nccl.get("available"):
        return []
    nccl_env = nccl.get("env") or {}
    groups: dict[tuple[str, str], set] = {}
    for t in nccl.get("transports") or []:
        src, dst, used = int(t["src"]), int(t["dst"]), t["transport"]
        if _host_of(nccl, src) != _host_of(nccl, dst) and None not in (_host_of(nccl, src), _host_of(nccl, dst)):
            continue  # GPUs of two hosts: the network is the path
        a, b = sorted((_gpu_of(nccl, src), _gpu_of(nccl, dst)))
        if a == b:
            continue
        offer, words = offered_path(topology, nvlink, a, b)
        if _slower(used, offer):
            groups.setdefault((used, words), set()).add((a, b))
    out = []
    for (used, words), pairs in sorted(groups.items()):
        pairs = tuple(sorted(pairs))
        variables = tuple(forcing(used, env, nccl_env))
        joins = "joins" if len(pairs) == 1 else "join"
        where = (f"which {words} {joins}" if words.startswith(("NVLink", "PCIe")) else "on one host")
        text = f"NCCL used {used} between {_pairs_text(pairs)}, {where}; {_variables_text(variables)}"
        out.append(Finding(used, pairs, words, variables, text))
    return out


def used_text(nccl: dict | None, topology: dict | None, nvlink: dict | None) -> str:
    """What NCCL used, said when nothing is slower than offered ("P2P/CUMEM between GPU0 and GPU1 (NV18)")."""
    if not nccl or not nccl.get("available"):
        return ""
    seen: dict[str, set] = {}
    for t in nccl.get("transports") or []:
        a, b = sorted((_gpu_of(nccl, int(t["src"])), _gpu_of(nccl, int(t["dst"]))))
        if a != b:
            seen.setdefault(t["transport"], set()).add((a, b))
    parts = []
    for used, pairs in sorted(seen.items()):
        pairs = sorted(pairs)
        link = _link(topology, *pairs[0])
        parts.append(f"{used} between {_pairs_text(pairs)}" + (f" ({link['raw']})" if link and link.get("raw") else ""))
    return "; ".join(parts)
