"""Parse `nvidia-smi topo -m` (the GPUDirect communication matrix) and probe it on this host.

The matrix tells which path two GPUs share: NV# (a bonded set of # NVLinks) or a PCIe path of
growing length (PIX < PXB < PHB < NODE < SYS). That path bounds the bus bandwidth a collective
can reach, so the report and the advice rules read it from here.

The parser keys on the documented layout rather than on column positions, because real output
varies: tab- or space-separated, ANSI underline codes around the header, an empty tab before
"GPU NUMA ID", legacy NIC columns named mlx5_N instead of NICN, optional "Legend:" and
"NIC Legend:" sections, and sometimes `nvidia-smi -L` lines appended by whoever captured it.

Users also paste the matrix from a chat, which mangles it further: the underline codes lose their
ESC byte (a bare "[4m" stays behind), the header loses its tabs ("GPU0GPU1NIC0NIC1CPU Affinity")
or the NIC Legend is left out. The parser recovers what it can (column names from the row labels,
NICs under their column names), says so under "warnings", and otherwise raises
TopologyParseError naming the line it could not read. It never drops a NIC silently.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

# Legend of `nvidia-smi topo -m`; "SOC" is the pre-2017 spelling of SYS.
PATH_TYPES = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
# GPU-to-NIC path classes from closest to farthest; NCCL uses GPUDirect RDMA by default up to PXB
# (NCCL_NET_GDR_LEVEL), so a GPU whose nearest NIC is PIX or PXB can read/write it directly.
NIC_PATH_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
GDR_PATHS = ("PIX", "PXB")
_TRAILING_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# SGR codes as the terminal wrote them (ESC [ 4 m), as `cat -v` shows them (^[[4m), and as a chat
# paste leaves them once the invisible ESC byte is gone ([4m).
_ANSI = re.compile(r"(?:\x1b|\^\[)?\[[0-9;]*m|\x1b\[[0-9;]*[A-Za-z]")
_NV = re.compile(r"^NV(\d+)$")
# One matrix cell, and a run of cells whose separators were lost ("XNV18SYS").
_CELL = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC")
_CELLS = re.compile(rf"(?:{_CELL.pattern})+")
# A device column name: GPU0, NIC3, mlx5_0, ib0, bnxt_re1 (letters, digits, an optional _digits).
_NAME = re.compile(r"[A-Za-z][A-Za-z_]*\d+(?:_\d+)?")
# A GPU or NIC name starting inside a token means two names ran together.
_GLUED_INSIDE = re.compile(r"(?<=.)(?:GPU|NIC)\d")
_GPU_LIST = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)\s]+)\)\s*$")
# Legend entries are indented in nvidia-smi's output; pasted text often loses the indent.
_LEGEND_ENTRY = re.compile(r"^\s*(\S+)\s+=\s+(.+?)\s*$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+):\s+(\S+)\s*$")
_SECTION_ENDS = ("Legend:", "NIC Legend:")

TOPO_TIMEOUT_S = 20


class TopologyParseError(ValueError):
    """A line of `nvidia-smi topo -m` output that could not be read; the message names it (1-based)."""

    def __init__(self, line_no: int, line: str, why: str):
        self.line_no, self.line, self.why = line_no, line, why
        shown = line.strip()
        shown = shown if len(shown) <= 120 else shown[:119] + "…"
        # One line on purpose: the CLI prints it as its single error line.
        super().__init__(f"line {line_no}: {why}: {shown!r}")


@dataclass
class _Row:
    line_no: int
    line: str
    label: str
    cells: list[str]


@dataclass
class _Header:
    columns: list[str]
    trailing: list[str]
    warnings: list[str] = field(default_factory=list)


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


def _clean(text: str) -> list[str]:
    """Lines without ANSI codes (intact or with the ESC byte lost) and without CR of CRLF pastes."""
    return _ANSI.sub("", text or "").replace("\r", "").splitlines()


def _is_row(tokens: list[str]) -> bool:
    """A matrix row: a label, then cells; every real row has its X on the diagonal somewhere."""
    return len(tokens) >= 2 and any(_CELLS.fullmatch(t) for t in tokens[1:])


def _find_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        tokens = line.split()
        # startswith, not tokens[0] == "GPU0": a header that lost its tabs reads "GPU0GPU1...".
        if tokens and tokens[0].startswith("GPU0") and "X" not in tokens and not _is_row(tokens):
            return i
    return None


def _split_cells(tokens: list[str]) -> list[str]:
    """Split cells that ran together ("NV18SYS" -> NV18, SYS); other tokens (affinities) stay whole."""
    out = []
    for t in tokens:
        out += _CELL.findall(t) if _CELLS.fullmatch(t) else [t]
    return out


def _matrix_rows(lines: list[str], h: int) -> list[_Row]:
    """The rows below the header, up to the legends, the `nvidia-smi -L` lines or other trailing text."""
    rows = []
    for i in range(h + 1, len(lines)):
        line = lines[i]
        tokens = line.split()
        if not tokens:
            continue  # chat pastes sometimes double-space lines
        if line.strip() in _SECTION_ENDS or _GPU_LIST.match(line.strip()) or not _is_row(tokens):
            break
        rows.append(_Row(i + 1, line, tokens[0], _split_cells(tokens[1:])))
    return rows


def _split_glued(token: str, labels: list[str]) -> list[str] | None:
    """Split names that ran together, preferring the row labels (longest first), else the name pattern."""
    pieces, i = [], 0
    by_length = sorted(set(labels), key=len, reverse=True)
    while i < len(token):
        hit = next((lab for lab in by_length if token.startswith(lab, i)), None)
        if hit is None:
            m = _NAME.match(token, i)
            hit = m.group(0) if m else None
        if hit is None:
            return None
        pieces.append(hit)
        i += len(hit)
    return pieces


def _read_header(lines: list[str], h: int, rows: list[_Row]) -> _Header:
    header = lines[h]
    # Device columns are the header text before the first trailing (multi-word) column.
    first_trailing = min((header.find(c) for c in _TRAILING_COLUMNS if c in header), default=-1)
    device_part = header[:first_trailing] if first_trailing >= 0 else header
    trailing = sorted((c for c in _TRAILING_COLUMNS if c in header), key=header.find)
    out = _Header([], trailing)
    labels = [r.label for r in rows]
    for token in device_part.split():
        if token in labels or (_NAME.fullmatch(token) and not _GLUED_INSIDE.search(token)):
            out.columns.append(token)
            continue
        pieces = _split_glued(token, labels)
        if pieces is None:
            if _GLUED_INSIDE.search(token):
                raise TopologyParseError(h + 1, header, f"could not split {token!r} into column names "
                                         "(the separators between them were lost and no row label matches)")
            out.columns.append(token)  # an unusual but whitespace-delimited NIC name: keep it whole
            continue
        out.columns += pieces
        guessed = [p for p in pieces if p not in labels]
        note = f" ({', '.join(guessed)} by name pattern only: no row confirms them)" if guessed else ""
        out.warnings.append(f"line {h + 1}: column names ran together in {token!r}; "
                            f"read {', '.join(pieces)}{note}")
    return out


def _check_rows(rows: list[_Row], columns: list[str]) -> list[str]:
    """Every row must be a header column with its X on the diagonal; short rows are warned about."""
    warnings = []
    for r in rows:
        if r.label not in columns:
            raise TopologyParseError(r.line_no, r.line, f"row {r.label!r} is not a column of the header "
                                     f"({' '.join(columns)})")
        own = columns.index(r.label)
        if own < len(r.cells) and r.cells[own] != "X":
            raise TopologyParseError(r.line_no, r.line, f"row {r.label} has {r.cells[own]!r} in its own column "
                                     "(expected X): the header columns and the cells do not line up")
        if len(r.cells) < len(columns):
            missing = columns[len(r.cells):]
            warnings.append(f"line {r.line_no}: row {r.label} has {len(r.cells)} cells for {len(columns)} "
                            f"columns; no value for {', '.join(missing)}")
    return warnings


def _read_legends(lines: list[str]) -> tuple[dict, dict | None, dict, dict]:
    """Legend, NIC Legend (None when the section is absent), and GPU names/UUIDs from `nvidia-smi -L`."""
    legend, nic_legend, gpu_names, gpu_uuids = {}, None, {}, {}
    section = None
    for line in lines:
        s = line.strip()
        if s == "Legend:":
            section = "legend"
            continue
        if s == "NIC Legend:":
            section, nic_legend = "nic", {}
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
    return legend, nic_legend, gpu_names, gpu_uuids


def _nic_legend_warnings(nic_cols: list[str], nic_legend: dict | None) -> list[str]:
    named = [c for c in nic_cols if c.startswith("NIC")]  # legacy columns (mlx5_0) name the device themselves
    if nic_legend is None:
        if named:
            return [f"no NIC Legend section: {', '.join(named)} keep their column names (device names unknown)"]
        return []
    out = []
    unnamed = [c for c in named if c not in nic_legend]
    if unnamed:
        out.append(f"NIC Legend does not name {', '.join(unnamed)}; kept under the column name")
    extra = [f"{n} ({d})" for n, d in nic_legend.items() if n not in nic_cols]
    if extra:
        out.append(f"NIC Legend lists {', '.join(extra)}, which the matrix has no column for")
    return out


def nearest_nics(gpus: list[str], nics: list[dict], matrix: dict) -> dict:
    """Per GPU, the NIC(s) on the closest path class, that class, and whether GPUDirect RDMA is viable.

    Ties keep every NIC of the best class (an 8-GPU node often has two NICs behind one switch)."""
    out = {}
    if not nics:
        return out
    rank = {t: i for i, t in enumerate(NIC_PATH_ORDER)}
    device = {n["name"]: n["device"] for n in nics}
    for g in gpus:
        classes = {n: _path_type((matrix.get(g) or {}).get(n))[0] for n in device}
        ranked = {n: rank[t] for n, t in classes.items() if t in rank}
        if not ranked:
            out[g] = {"nics": [], "devices": [], "type": None, "gpudirect_rdma": False}
            continue
        best = min(ranked.values())
        names = [n for n in device if ranked.get(n) == best]
        kind = NIC_PATH_ORDER[best]
        out[g] = {"nics": names, "devices": [device[n] for n in names], "type": kind,
                  "gpudirect_rdma": kind in GDR_PATHS}
    return out


def parse_topology(text: str) -> dict:
    """Parse `nvidia-smi topo -m` output; raises ValueError (TopologyParseError for a named line)."""
    lines = _clean(text)
    h = _find_header(lines)
    if h is None:
        raise ValueError("not nvidia-smi topo -m output: no header line starting with GPU0")

    rows = _matrix_rows(lines, h)
    head = _read_header(lines, h, rows)
    columns, trailing = head.columns, head.trailing
    warnings = list(head.warnings)
    warnings += _check_rows(rows, columns)

    matrix: dict[str, dict[str, str | None]] = {}
    extra: dict[str, list[str]] = {}
    for r in rows:
        matrix[r.label] = {col: (r.cells[j] if j < len(r.cells) else None) for j, col in enumerate(columns)}
        extra[r.label] = r.cells[len(columns):]

    gpus = [c for c in columns if re.fullmatch(r"GPU\d+", c)]
    if "GPU0" not in matrix or matrix["GPU0"].get("GPU0") != "X":
        raise ValueError("not nvidia-smi topo -m output: no GPU0 row with X on the diagonal")
    rowless = [g for g in gpus if g not in matrix]
    if rowless:
        warnings.append(f"no row for {', '.join(rowless)}; their links come from the other GPUs' rows only")

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
    legend, nic_legend, gpu_names, gpu_uuids = _read_legends(lines)
    warnings += _nic_legend_warnings(nic_cols, nic_legend)
    nic_legend = nic_legend or {}
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
        "nearest_nic": nearest_nics(gpus, nics, matrix),
        "warnings": warnings,
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
    # the text as a person reads it: nvidia-smi underlines the header with ANSI codes, which a report or a
    # JSON viewer would print as '[4m'
    raw = "\n".join(_clean(proc.stdout)) + "\n"
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
