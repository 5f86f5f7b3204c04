"""Parse `nvidia-smi topo -m` (the GPUDirect communication matrix) and probe it on this host.

The matrix tells which path two GPUs share: NV# (a bonded set of # NVLinks) or a PCIe path of
growing length (PIX < PXB < PHB < NODE < SYS). That path bounds the bus bandwidth a collective
can reach, so the report and the advice rules read it from here.

The parser keys on the documented layout rather than on column positions, because real output
varies: tab- or space-separated, ANSI underline codes around the header, an empty tab before
"GPU NUMA ID", legacy NIC columns named mlx5_N instead of NICN, optional "Legend:" and
"NIC Legend:" sections, and sometimes `nvidia-smi -L` lines appended by whoever captured it.
"""

from __future__ import annotations

import re
import shutil
import subprocess

# Legend of `nvidia-smi topo -m`; "SOC" is the pre-2017 spelling of SYS.
PATH_TYPES = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
_TRAILING_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NV = re.compile(r"^NV(\d+)$")
_GPU_LIST = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)\s]+)\)\s*$")
_LEGEND_ENTRY = re.compile(r"^\s+(\S+)\s+=\s+(.+?)\s*$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s+(NIC\d+):\s+(\S+)\s*$")

TOPO_TIMEOUT_S = 20


def _path_type(cell: str | None) -> tuple[str | None, int | None]:
    """Map a matrix cell to (type, nvlink count); unknown spellings pass through unchanged."""
    if cell is None:
        return None, None
    m = _NV.match(cell)
    if m:
        return "NV", int(m.group(1))
    if cell == "SOC":
        return "SYS", None
    return cell, None


def _find_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0" and "X" not in tokens:
            return i
    return None


def parse_topology(text: str) -> dict:
    """Parse `nvidia-smi topo -m` output; raises ValueError on anything else."""
    clean = _ANSI.sub("", text or "")
    lines = clean.splitlines()
    h = _find_header(lines)
    if h is None:
        raise ValueError("not nvidia-smi topo -m output: no header line starting with GPU0")

    header = lines[h]
    # Device columns are the header tokens before the first trailing (multi-word) column.
    first_trailing = min((header.find(c) for c in _TRAILING_COLUMNS if c in header), default=-1)
    device_part = header[:first_trailing] if first_trailing >= 0 else header
    columns = device_part.split()
    trailing = sorted((c for c in _TRAILING_COLUMNS if c in header), key=header.find)

    matrix: dict[str, dict[str, str | None]] = {}
    extra: dict[str, list[str]] = {}
    for line in lines[h + 1 :]:
        tokens = line.split()
        if line.strip() in ("Legend:", "NIC Legend:"):
            break  # the matrix is over; the sections below are read separately
        if not tokens or tokens[0] not in columns:
            continue
        name, cells = tokens[0], tokens[1:]
        matrix[name] = {col: (cells[j] if j < len(cells) else None) for j, col in enumerate(columns)}
        extra[name] = cells[len(columns) :]

    gpus = [c for c in columns if re.fullmatch(r"GPU\d+", c)]
    if "GPU0" not in matrix or matrix["GPU0"].get("GPU0") != "X":
        raise ValueError("not nvidia-smi topo -m output: no GPU0 row with X on the diagonal")

    cpu_affinity, numa_affinity, gpu_numa_id = {}, {}, {}
    for g in gpus:
        values = extra.get(g, [])
        # "N/A" (no NUMA information, e.g. in VMs) becomes None so JSON readers see a null.
        by_name = {k: (None if v == "N/A" else v) for k, v in zip(trailing, values)}
        cpu_affinity[g] = by_name.get("CPU Affinity")
        numa_affinity[g] = by_name.get("NUMA Affinity")
        gpu_numa_id[g] = by_name.get("GPU NUMA ID")

    links = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            cell = (matrix.get(a) or {}).get(b)
            kind, n = _path_type(cell)
            links.append({"a": a, "b": b, "type": kind, "nvlinks": n or 0, "raw": cell})

    # NIC columns: NICn (with a "NIC Legend:" mapping) or legacy device names such as mlx5_0.
    nic_cols = [c for c in columns if c not in gpus]
    legend, nic_legend, gpu_names, gpu_uuids = {}, {}, {}, {}
    section = None
    for line in lines:
        s = line.strip()
        if s == "Legend:":
            section = "legend"
            continue
        if s == "NIC Legend:":
            section = "nic"
            continue
        m = _GPU_LIST.match(s)
        if m:
            gpu_names[f"GPU{m.group(1)}"] = m.group(2)
            gpu_uuids[f"GPU{m.group(1)}"] = m.group(3)
            continue
        if section == "legend" and (m := _LEGEND_ENTRY.match(line)):
            legend[m.group(1)] = m.group(2)
        elif section == "nic" and (m := _NIC_LEGEND_ENTRY.match(line)):
            nic_legend[m.group(1)] = m.group(2)
    nics = [{"name": c, "device": nic_legend.get(c, None if c.startswith("NIC") else c)} for c in nic_cols]
    nic_links = [
        {"gpu": g, "nic": c, "type": _path_type(matrix[g].get(c))[0]} for g in gpus if g in matrix for c in nic_cols
    ]

    return {
        "gpus": gpus,
        "matrix": matrix,
        "links": links,
        "nic_links": nic_links,
        "cpu_affinity": cpu_affinity,
        "numa_affinity": numa_affinity,
        "gpu_numa_id": gpu_numa_id,
        "nics": nics,
        "legend": legend,
        "gpu_names": gpu_names,
        "gpu_uuids": gpu_uuids,
    }


def path_between(topology: dict, a: str, b: str) -> dict | None:
    """The link record for GPUs a and b (order-free), or None."""
    for link in topology.get("links", []):
        if {link["a"], link["b"]} == {a, b}:
            return link
    return None


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=TOPO_TIMEOUT_S, check=False)


def probe_topology() -> dict:
    """Run `nvidia-smi topo -m` here; {"available": False, "reason": ...} on CPU hosts or failure."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"available": False, "reason": "nvidia-smi not found on PATH (no NVIDIA driver on this host)"}
    try:
        proc = _run([exe, "topo", "-m"])
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"nvidia-smi topo -m did not finish within {TOPO_TIMEOUT_S} s"}
    except OSError as exc:
        return {"available": False, "reason": f"could not run nvidia-smi: {exc}"}
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout or "").strip().splitlines()
        return {"available": False, "reason": f"nvidia-smi topo -m exited {proc.returncode}: {msg[0] if msg else ''}"}
    raw = proc.stdout
    # GPU names/UUIDs come from `nvidia-smi -L`; a failure there only loses the names.
    try:
        names = _run([exe, "-L"])
        if names.returncode == 0:
            raw = raw.rstrip("\n") + "\n" + names.stdout
    except (subprocess.TimeoutExpired, OSError):
        pass
    try:
        parsed = parse_topology(raw)
    except ValueError as exc:
        return {"available": False, "reason": str(exc), "raw": raw}
    return {"available": True, **parsed, "raw": raw}
