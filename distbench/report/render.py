"""The Markdown + self-contained HTML report.

Both are rendered from the same context by Jinja2 templates in distbench/report/templates. The HTML inlines
every figure as a data: URI and has no external CSS/JS, so it can be mailed or archived as one file.
The Markdown links copies of its figures in figures/ beside it, so the report directory is portable.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from distbench.comm.analysis.findings import (
    TIMING_PREFERENCE, backend_name, compute_findings, human_bytes, primary_rows, read_summary, skipped_points,
)
from distbench.core.io import atomic_write_bytes, atomic_write_text
from distbench.core.provenance import JOB_ENV_PREFIXES
from distbench.core.units import human_gbps, human_time_us, pct, sig3
from distbench.report.verdict import headlines

TEMPLATES = Path(__file__).parent / "templates"
MAX_TABLE_ROWS = 200  # beyond this a table stops being read; the CSVs hold everything
MAX_SIZES_PER_OP = 12  # compact summary: evenly spaced sizes, first and last always kept
ENV_KEYS = ("hostname", "platform", "python", "torch", "cuda", "nccl_version", "gloo_available",
            "driver", "gpu_count", "cpu_model", "cpu_count", "git_commit")
# Row labels where the probe's key alone misleads. nccl_version is what torch loaded; NVIDIA images also
# set an NCCL_VERSION environment variable (the NCCL the image ships), which lands in job_env.
ENV_LABELS = {"nccl_version": "NCCL (loaded by torch)"}
JOB_ENV_LABEL = f"environment variables ({', '.join(p + '*' for p in JOB_ENV_PREFIXES)})"


def _fmt(v, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def _time(us) -> str | None:
    """A time in µs as the report writes it (distbench.core.units): the unit that fits."""
    return None if us is None or pd.isna(us) else human_time_us(us)


def _gbps(x) -> str | None:
    """A bandwidth in GB/s, three significant digits (distbench.core.units); the header says GB/s."""
    return None if x is None or pd.isna(x) else sig3(x)


def _table(headers, rows, total: int | None = None) -> dict:
    """A table both templates render: headers, rows of strings, and how many rows were cut."""
    rows = [[_fmt(c) for c in r] for r in rows]
    total = len(rows) if total is None else total
    return {"headers": list(headers), "rows": rows[:MAX_TABLE_ROWS], "omitted": max(0, total - MAX_TABLE_ROWS),
            "note": ""}


def _nccl_loaded(env: dict) -> str:
    if env.get("nccl_version"):
        return str(env["nccl_version"])
    if env.get("cuda_available") is False or ("cuda_available" not in env and not env.get("cuda")):
        return "n/a (no CUDA)"
    return "n/a (torch reported no NCCL)"


def _job_env(job_env) -> str:
    """Environment variables as NAME=value, shell-quoted where needed, in one cell."""
    if not isinstance(job_env, dict):
        return str(job_env)
    return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(job_env.items())) or "none set"


def _env_table(env: dict) -> dict:
    if not env:
        return _table(["key", "value"], [])
    rows = []
    for k in ENV_KEYS:
        if k == "nccl_version":
            rows.append([ENV_LABELS[k], _nccl_loaded(env)])
        elif k in env:
            rows.append([ENV_LABELS.get(k, k), env.get(k)])
    rows += [[f"GPU {g.get('index', i)}", f"{g.get('name')} ({_fmt(g.get('memory_total_mib'))} MiB, "
              f"PCI {g.get('pci_bus_id')}, {g.get('uuid')})"] for i, g in enumerate(env.get("gpus") or [])]
    if "job_env" in env:
        rows.append([JOB_ENV_LABEL, _job_env(env["job_env"])])
    rows += [[k, json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in env.items()
             if k not in ENV_KEYS and k not in ("gpus", "job_env")]
    return _table(["key", "value"], rows)


def _plan(plan: dict, summary: pd.DataFrame | None = None) -> dict:
    ws = plan.get("world_sizes") or {}
    ran = [f"{backend_name(b)} ({b}): world sizes {', '.join(map(str, ws.get(b, [])))}"
           for b in plan.get("backends_run") or []]
    skipped = [f"{s.get('what')}: skipped — {s.get('why')}" for s in plan.get("skipped") or []]
    skipped += skipped_points(summary) if summary is not None and len(summary) else []
    gpus = f"{plan.get('gpus')} ({plan.get('gpus_source')})" if "gpus" in plan else None
    return {"ran": ran, "skipped": skipped, "gpus": gpus}


def _largest_table(largest: pd.DataFrame, peak: dict | None) -> dict:
    peak_gbps = float(peak["peak_gbps"]) if peak and peak.get("peak_gbps") else None
    # nccl_env / inplace columns only when they vary; otherwise rows would look like duplicates or waste width
    varying = [c for c in ("nodes", "traffic", "nccl_env", "inplace") if c in largest and largest[c].nunique() > 1]
    keys = ["op", "backend", "world_size", "dtype", *varying, "timing"]
    # time_us combines every rank's time as rank_agg says (max by default); the spread says how far apart they were
    aggs = sorted(set(largest["rank_agg"].dropna())) if "rank_agg" in largest else []
    time_header = f"time ({'/'.join(aggs)} over ranks)" if aggs else "time"
    spread = "rank_spread_pct_median" in largest and largest["rank_spread_pct_median"].notna().any()
    headers = ["op", "backend", "ws", "dtype", *varying, "timing", "size", time_header, "busbw GB/s"]
    if spread:
        headers.append("rank spread %")
    if peak_gbps:
        headers.append("% of link peak")
    rows = []
    for _, r in largest.sort_values(keys).iterrows():
        row = [r[k] for k in keys] + [human_bytes(r["size_bytes"]), _time(r["time_us_median"]), _gbps(r["busbw_gbps_median"])]
        if spread:
            row.append(r["rank_spread_pct_median"])
        if peak_gbps:  # the link peak describes GPU links: meaningless for Gloo over TCP/shared memory
            bw = r["busbw_gbps_median"]
            row.append(f"{100 * bw / peak_gbps:.0f}%" if r["backend"] == "nccl" and pd.notna(bw) else None)
        rows.append(row)
    return _table(headers, rows)


def _thin(sizes: list[int]) -> list[int]:
    if len(sizes) <= MAX_SIZES_PER_OP:
        return sizes
    step = (len(sizes) - 1) / (MAX_SIZES_PER_OP - 1)
    return sorted({sizes[round(i * step)] for i in range(MAX_SIZES_PER_OP)})


def _compact_table(summary: pd.DataFrame, primary: bool = True) -> dict:
    """op × size rows, one column per (backend, world size): median time and busbw, primary timing
    (or the rows as given, primary=False)."""
    p = primary_rows(summary) if primary else summary[summary["status"] == "ok"]
    if p.empty:
        return _table([], [])
    # a column per (backend, world size, nodes): a job across nodes is its own column, never merged
    # with a one-node job of the same size
    cols = sorted(set(zip(p["backend"], p["world_size"], p["nodes"])))
    cell = {(r["op"], r["size_bytes"], r["backend"], r["world_size"], r["nodes"]): r for _, r in p.iterrows()}
    timing = {b: g["timing"].iloc[0] for b, g in p.groupby("backend")}
    headers = ["op", "size"] + [f"{b} ws{w}{f' on {n} nodes' if n > 1 else ''} ({timing[b]})" for b, w, n in cols]
    rows, total = [], 0
    for op in dict.fromkeys(p["op"]):
        sizes = sorted(set(p.loc[p["op"] == op, "size_bytes"]))
        total += len(sizes)
        for s in _thin(sizes):
            row = [op, human_bytes(s)]
            for b, w, n in cols:
                r = cell.get((op, s, b, w, n))
                if r is None:
                    row.append(None)
                    continue
                bw = r["busbw_gbps_median"]
                row.append(_time(r["time_us_median"]) + (f" · {human_gbps(bw)}" if pd.notna(bw) else ""))
            rows.append(row)
    table = _table(headers, rows)
    table["note"] = f"{len(rows)} of {total} op × size rows shown" if len(rows) < total else ""
    return table


def _pivots(summary: pd.DataFrame) -> list[dict]:
    """One compact table per op: sizes as rows, one column per (backend, world size[, nodes]),
    each cell the median time and busbw; the best timing mode per backend first (CUDA events,
    else graph, else host), the other modes as further tables (collapsed in HTML)."""
    out = []
    for op in dict.fromkeys(summary["op"]) if len(summary) else []:
        rows = summary[summary["op"] == op]
        modes = [t for t in TIMING_PREFERENCE if t in set(rows["timing"])]
        tables = []
        for i, mode in enumerate(modes):
            # the best mode: each backend's own first choice (Gloo has host only); then each mode alone
            pick = primary_rows(rows) if i == 0 else primary_rows(rows[rows["timing"] == mode])
            if mode == modes[0] or len(pick):
                t = _compact_table(pick, primary=False)
                if t["rows"]:
                    tables.append({"timing": "best per backend" if i == 0 else mode, "table": t})
        if tables:
            out.append({"op": op, "main": tables[0], "others": tables[1:]})
    return out


def _nodes_table(largest: pd.DataFrame) -> dict | None:
    """Within one node against across nodes, per op at its largest size (primary timing): only when
    some job spanned nodes. Across nodes the slowest link is the network, not NVLink/PCIe."""
    p = primary_rows(largest)
    if p.empty or "nodes" not in p or not (p["nodes"] > 1).any():
        return None
    headers = ["op", "backend", "ranks", "nodes × ranks per node", "links crossed", "size", "time", "busbw GB/s"]
    rows = []
    for _, r in p.sort_values(["op", "backend", "nodes", "world_size"]).iterrows():
        n = int(r["nodes"])
        rows.append([r["op"], r["backend"], int(r["world_size"]), f"{n} × {int(r['world_size']) // n}",
                     "inter-node (network)" if n > 1 else "intra-node", human_bytes(r["size_bytes"]),
                     _time(r["time_us_median"]), _gbps(r["busbw_gbps_median"])])
    return _table(headers, rows)


def _traffic_table(largest: pd.DataFrame) -> dict | None:
    """all_to_all_v per traffic matrix at its largest size: the average busbw, the busiest rank and
    its own link rate, and the time against the uniform matrix of the same job."""
    v = primary_rows(largest, vary=("traffic",))
    v = v[v["op"] == "all_to_all_v"] if "op" in v else v
    if v.empty:
        return None
    headers = ["traffic", "backend", "ws", "size", "time", "busbw GB/s", "busiest rank", "its bytes",
               "its time", "its rate GB/s", "time vs uniform"]
    uniform = {(r["backend"], r["world_size"], r["nodes"], r["size_bytes"]): r["time_us_median"]
               for _, r in v[v["traffic"] == "uniform"].iterrows()}
    rows = []
    for _, r in v.sort_values(["backend", "world_size", "traffic"]).iterrows():
        own_us, own_bytes = r["busiest_rank_time_us_median"], r["busiest_rank_bytes"]
        rate = own_bytes / (own_us * 1e3) if pd.notna(own_bytes) and pd.notna(own_us) and own_us > 0 else None
        base = uniform.get((r["backend"], r["world_size"], r["nodes"], r["size_bytes"]))
        rows.append([r["traffic"], r["backend"], int(r["world_size"]), human_bytes(r["size_bytes"]),
                     _time(r["time_us_median"]), _gbps(r["busbw_gbps_median"]),
                     None if pd.isna(r["busiest_rank"]) else int(r["busiest_rank"]),
                     None if pd.isna(own_bytes) else human_bytes(int(own_bytes)), _time(own_us), _gbps(rate),
                     f"{r['time_us_median'] / base:.2f}×" if base and r["traffic"] != "uniform" else None])
    return _table(headers, rows)


def _problem_table(summary: pd.DataFrame) -> dict:
    bad = summary[summary["status"] != "ok"]
    rows = [[r["status"], r["op"], r["backend"], r["world_size"], r["dtype"], r["nccl_env"], r["timing"],
             human_bytes(r["size_bytes"]), r["message"]] for _, r in bad.iterrows()]
    return _table(["status", "op", "backend", "ws", "dtype", "nccl_env", "timing", "size", "message"], rows)


FIGURE_TITLES = {
    "time_vs_size": "Time per op vs message size",
    "busbw_vs_size": "Bus bandwidth vs message size",
    "backend_comparison_100mb": "Backends compared at about 100 MB",
    "timing_modes": "Timing modes (events, CUDA graph, host clock)",
    "nccl_env": "NCCL environment sweep",
    "dtype": "Bus bandwidth by dtype",
}


# which report section shows the figures of each figure directory (the plot rules' outputs)
FIGURE_SECTIONS = {"figures": "communication", "figures_pairs": "communication", "figures_training": "training",
                   "figures_memory": "memory", "figures_predict": "prediction"}


def _figures(figures, figures_dir: Path, out_md: Path) -> list[dict]:
    """One entry per figure stem: PNG for display (inlined in HTML), SVG offered as a link.

    The Markdown links point into figures_dir (beside the report: the copies _publish_files puts
    there), so the report directory can be copied or archived on its own.
    """
    def link(p: Path) -> str:  # where the copy will be, relative to the report
        return Path(os.path.relpath(figures_dir / p.name, out_md.parent)).as_posix()

    by_stem: dict[str, dict[str, Path]] = {}
    for f in map(Path, figures):
        if f.exists():
            by_stem.setdefault(f.stem, {})[f.suffix.lower().lstrip(".")] = f
    out = []
    for stem, files in by_stem.items():
        img = files.get("png") or files.get("svg")
        if img is None:
            continue
        mime = "image/png" if img.suffix.lower() == ".png" else "image/svg+xml"
        svg = files.get("svg") if files.get("svg") != img else None
        out.append({"name": stem, "title": FIGURE_TITLES.get(stem, stem.replace("_", " ")), "md_src": link(img),
                    "section": FIGURE_SECTIONS.get(img.parent.name, "other"),
                    "svg": link(svg) if svg else None, "files": [img, *([svg] if svg else [])],
                    "data_uri": f"data:{mime};base64," + base64.b64encode(img.read_bytes()).decode("ascii")})
    return out


def _publish_files(files: list[Path], target_dir: Path) -> None:
    """Put the linked files (the figures, or the full tables) into target_dir, replacing what was
    there, never half-way.

    They are copied into a temporary directory next to target_dir, which then replaces it by rename;
    a failure on the way removes the temporary directory and leaves any previous target_dir as it was.
    Files that already live in target_dir (publish_run renders beside its own figures/ and tables/)
    stay put, and that directory is not replaced: only the missing files are added, each atomically.
    """
    target_dir = Path(target_dir)
    here = target_dir.resolve() if target_dir.is_dir() else None
    if here is not None and any(f.resolve().parent == here for f in files):
        for f in files:
            if f.resolve().parent != here:
                atomic_write_bytes(target_dir / f.name, f.read_bytes())
        return
    target_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=target_dir.parent, prefix=f".{target_dir.name}.", suffix=".tmp"))
    try:
        for f in files:
            shutil.copyfile(f, stage / f.name)
        os.chmod(stage, 0o777 & ~_umask())  # mkdtemp creates 0700; reports are meant to be shared
        _swap_in(stage, target_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _swap_in(new: Path, target: Path) -> None:
    """Rename directory new to target; an existing target is moved aside first (rename cannot replace a
    non-empty directory), put back if the rename fails, and deleted once new is in place."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    if not target.exists():
        os.replace(new, target)
        return
    aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
    os.replace(target, aside / target.name)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(aside / target.name, target)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _cell(v, limit: int = 300) -> str | None:
    """A probe value as one table cell: scalars as is, flat dicts/lists inline, deep structures counted."""
    if v is None or isinstance(v, (str, int, float, bool)):
        text = v
    elif isinstance(v, dict) and all(not isinstance(x, (dict, list)) for x in v.values()):
        text = ", ".join(f"{k}={x}" for k, x in v.items()) or None
    elif isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
        text = ", ".join(map(str, v)) or None
    else:  # rings, tuning tables, matrices: too deep for a report cell; the JSON file keeps them
        text = f"{len(v)} {'entry' if len(v) == 1 else 'entries'} (see the probe JSON)"
    return text if not isinstance(text, str) or len(text) <= limit else text[: limit - 1] + "…"


def _extra_block(value) -> dict:
    """An extra section as a table (flat values), bullet items and preformatted blocks (multi-line text)."""
    block = {"table": None, "items": [], "blocks": []}
    if isinstance(value, str):
        block["blocks"].append({"label": "", "text": value})
    elif isinstance(value, dict):
        multi = {k: v for k, v in value.items() if isinstance(v, str) and "\n" in v}
        block["blocks"] = [{"label": k, "text": v} for k, v in multi.items()]
        block["table"] = _table(["key", "value"], [[k, _cell(v)] for k, v in value.items() if k not in multi])
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        # JSON round trips sort keys; advice reads best as severity, text, then the evidence.
        keys = [k for k in ("severity", "text") if k in keys] + [k for k in keys if k not in ("severity", "text")]
        block["table"] = _table(keys, [[_cell(v.get(k)) for k in keys] for v in value])
    elif isinstance(value, list):
        block["items"] = [str(_cell(v)) for v in value]
    else:
        block["items"] = [str(value)]
    return block


# How good a link class is, best first (nvidia-smi topo -m's legend): the matrix's cell colours.
LINK_CLASSES = (("NV", "nvlink"), ("PIX", "pcie-switch"), ("PXB", "pcie-switch"), ("PHB", "pcie-host"),
                ("NODE", "numa"), ("SYS", "cross-socket"), ("NET", "network"), ("SOC", "cross-socket"))


def _link_class(cell: str) -> str:
    cell = str(cell or "").strip()
    if cell in ("X", ""):
        return "self"
    return next((cls for prefix, cls in LINK_CLASSES if cell.startswith(prefix)), "other")


def _topology_matrix(topology: dict | None) -> dict | None:
    """The GPU link matrix from the topology probe: a row per GPU, a column per GPU (and NIC), each
    cell the link class nvidia-smi names, coloured by class in the HTML."""
    matrix = (topology or {}).get("matrix") or {}
    if not matrix:
        return None
    gpus = [g for g in (topology.get("gpus") or list(matrix)) if g in matrix]
    columns = list(dict.fromkeys(c for g in gpus for c in matrix[g]))
    rows = [[g] + [matrix[g].get(c) for c in columns] for g in gpus]
    return {**_table(["", *columns], rows),
            "classes": [[""] + [_link_class(matrix[g].get(c)) for c in columns] for g in gpus],
            "note": "NV#: NVLink (# links); PIX/PXB: through PCIe switches; PHB: through the CPU's PCIe host bridge; "
                    "NODE: across PCIe host bridges within a NUMA node; SYS: across NUMA nodes (the CPU interconnect)."}


EXTRA_TITLES = {"advice": "Advice", "topology": "GPU topology", "nccl": "NCCL", "peak": "Link peak",
                "placement": "Rank placement"}


def _extras(extra: dict | None) -> list[dict]:
    out = []
    for key, value in (extra or {}).items():
        if value is None or value == [] or value == {}:
            continue  # render each section only when present
        out.append({"key": key, "title": EXTRA_TITLES.get(key, key.replace("_", " ").capitalize()),
                    **_extra_block(value)})
    return out


_MD_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MD_ESCAPABLE = re.compile(r"\\(?=[!-/:-@\[-`{-~])")  # a backslash CommonMark would read as an escape


def _md_text(v) -> str:
    """Text for Markdown outside code: &, < and > as HTML entities. Markdown renderers pass raw HTML
    through, so a probe value such as a hostname `<script>...` would otherwise become markup; as
    entities it renders as the same characters, inert."""
    return str(v).translate(_MD_HTML)


def _md_cell(v) -> str:
    """One GFM table cell: _md_text, then backslashes that would escape the next character doubled
    and every `|` escaped (GFM splits a row on each unescaped pipe, even inside code spans, so a
    value with a pipe would shift the columns), and line breaks as spaces (a row is one line)."""
    text = _MD_ESCAPABLE.sub(r"\\\\", _md_text(v)).replace("|", "\\|")
    return re.sub(r"\r\n|[\r\n]", " ", text)


def _md_fence(text) -> str:
    """A code fence longer than any run of backticks in text, so the text cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", str(text))), default=0)
    return "`" * max(3, longest + 1)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
    )
    env.filters["mdcell"] = _md_cell
    env.filters["mdtext"] = _md_text
    env.filters["mdfence"] = _md_fence
    return env


# The full comm tables the Markdown links (copies in tables/ beside it; the HTML has them collapsed).
FULL_TABLES = {"comm_largest.csv": "each series at its largest size", "comm_summary.csv": "every point",
               "comm_diagnosed.csv": "every point, with % of the link peak and NCCL's algorithm",
               "comm.csv": "every trial"}


def _full_tables(paths, out_md: Path, tables_dir: Path) -> list[dict]:
    """[{name, what, link, source}] of the tables that exist, linked relative to out_md."""
    out = []
    for path in map(Path, paths or []):
        if path.is_file():
            link = Path(os.path.relpath(Path(tables_dir) / path.name, Path(out_md).parent)).as_posix()
            out.append({"name": path.name, "what": FULL_TABLES.get(path.name, ""), "link": link, "source": str(path)})
    return out


def _figures_dir(out_md, figures_dir=None) -> Path:
    return Path(figures_dir) if figures_dir is not None else Path(out_md).parent / "figures"


def _tables_dir(out_md, tables_dir=None) -> Path:
    return Path(tables_dir) if tables_dir is not None else Path(out_md).parent / "tables"


def _pct(x):
    return None if x is None or pd.isna(x) else pct(x, 1)


def _lm_table(lm: pd.DataFrame):
    headers = ["model", "strategy", "ws", "tokens/s", "tokens/s per device", "TFLOP/s per device", "MFU", "peak",
               "efficiency vs plain 1 GPU", "exposed comm ms", "overlap", "trainable params", "grad MB per step",
               "attention", "compile", "status"]
    rows = []
    for _, r in lm.sort_values(["model", "strategy", "world_size"]).iterrows():
        peak = f"{r['peak_device']} {r['peak_tflops']:g}" if isinstance(r.get("peak_device"), str) and r["peak_device"] else None
        rows.append([r["model"], r["strategy"], int(r["world_size"]), r["tokens_per_s_median"],
                     r["tokens_per_s_per_device_median"], r["tflops_per_device"], _pct(r["mfu"]), peak,
                     _pct(r["efficiency_vs_plain_1gpu"]), r["exposed_comm_ms"] if r["world_size"] > 1 else None,
                     _pct(r["overlap_fraction"]), r["params_trainable"],
                     None if pd.isna(r["grad_bytes"]) else float(r["grad_bytes"]) / 1e6,
                     r["attention_kernel"], bool(r["compile"]), r["status"]])
    return _table(headers, rows)


def _training(summary_csv) -> dict | None:
    """The training family's section: computed findings first, then one row per configuration and
    world size (None when the run had no training jobs)."""
    if not summary_csv or not Path(summary_csv).exists():
        return None
    from distbench.training.analysis.summary import training_findings, verdict

    s = pd.read_csv(summary_csv)
    if s.empty:
        return None
    if "model" not in s:
        s = s.assign(model="mlp")
    s = s.assign(_not_plain=s["config"] != "plain").sort_values(["model", "_not_plain", "config", "world_size"])  # plain first
    lm, s = s[s["model"] != "mlp"], s[s["model"] == "mlp"]
    headers = ["config", "ws", "step ms", "compute-only ms", "exposed comm ms", "overlap", "samples/s",
               "efficiency vs plain 1 GPU", "vs own 1 GPU", "verdict", "status"]
    rows = []
    for _, r in s.iterrows():
        label = verdict(r)[0] if r["world_size"] > 1 and r["status"] == "ok" else None
        rows.append([r["config"], int(r["world_size"]), r["step_time_ms_median"], r["compute_only_ms_median"],
                     r["exposed_comm_ms"], _pct(r["overlap_fraction"]), r["samples_per_s_median"],
                     _pct(r["efficiency_vs_plain_1gpu"]), _pct(r["efficiency_vs_own_1gpu"]), label, r["status"]])
    scaling = ", ".join(sorted(set(pd.concat([s, lm])["scaling"].astype(str))))
    return {"findings": training_findings(pd.concat([s, lm])), "table": _table(headers, rows) if rows else None,
            "lm_table": _lm_table(lm) if len(lm) else None,
            "lm_note": ("Model FLOPs per token = 6 N + 12 L H Q T (N: parameters except the position embedding; "
                        "lora: 4 per frozen and 6 per trainable parameter), the PaLM/nanoGPT/torchtitan definition; "
                        "MFU = TFLOP/s per device / the device's dense peak for the dtype (distbench/training/analysis/mfu.py), "
                        "empty for a device not in that table. FSDP's compute-only step runs with gradient sync and "
                        "resharding off (no collective at all), and its optimizer then has no gradients to apply."),
            "note": (f"{scaling} scaling: "
                     + ("the per-rank batch is fixed, so the global batch grows with the world size"
                        if scaling == "weak" else "the global batch is fixed and split over the ranks")
                     + ". Efficiency = samples/s at N ranks / (N x samples/s of plain DDP on 1 rank);"
                       " exposed comm = DDP step - the same step without gradient sync (no_sync);"
                       " overlap = 1 - exposed / the gradient all-reduce alone.")}


def _memory(summary_csv) -> dict | None:
    """The memory family's section: one sentence per job, then one row per job (None when the run
    had no memory jobs). Snapshots (memory.snapshot) are listed by path."""
    if not summary_csv or not Path(summary_csv).exists():
        return None
    from distbench.memory.analysis.summary import human, memory_findings

    s = pd.read_csv(summary_csv)
    if s.empty:
        return None
    headers = ["model", "config", "ws", "batch", "parameters", "gradients", "optimizer", "activations",
               "activations per sample", "peak allocated", "of device", "unexplained", "estimate off by",
               "largest batch that fits", "status"]
    rows = []
    for _, r in s.sort_values(["model", "config", "world_size"]).iterrows():
        rows.append([r["model"], r["config"], int(r["world_size"]), r["largest_measured_batch"],
                     human(r["params_bytes"]), human(r["grads_bytes"]), human(r["optimizer_bytes"]),
                     human(r["activations_bytes"]), human(r["activation_bytes_per_sample"]),
                     None if pd.isna(r["peak_allocated_bytes"]) else human(r["peak_allocated_bytes"]),
                     _pct(r["peak_share"]), None if pd.isna(r["unexplained_bytes"]) else human(r["unexplained_bytes"]),
                     None if pd.isna(r["estimate_error_bytes"]) else human(r["estimate_error_bytes"]),
                     r["largest_batch_fits"] if pd.notna(r["largest_batch_fits"]) else (r["search_note"] or None),
                     r["status"]])
    # the run's memory jobs sit beside its tables: results/<label>/{tables,memory}
    run_dir = Path(summary_csv).parent.parent
    snapshots = sorted(str(p) for p in (run_dir / "memory").glob("*/*/*/*/snapshot.pickle"))
    return {"findings": memory_findings(s), "table": _table(headers, rows), "snapshots": snapshots,
            "note": ("Per rank, at the largest measured batch. Parts are counted from the tensors (unique storages: "
                     "distbench/memory/accounting.py); activations are what autograd saves for backward. "
                     "Unexplained = the allocator's peak allocated - the parts (DDP's buckets without "
                     "gradient_as_bucket_view, temporaries, workspaces); the estimate is parameters, gradients and "
                     "optimizer state by formula.")}


# Published 8-GPU NVLink ring all_reduce busbw at large sizes, NVLS off (H100/H200 HGX): nccl-tests
# issue 212, NCCL issue 1455. What the prediction at 8 GPUs is compared with.
PUBLISHED_8GPU_ALLREDUCE_BUSBW_GBPS = (360.0, 370.0)


def _prediction(validation_csv) -> dict | None:
    """The cluster prediction's section (distbench.predict.model), from the four tables written beside
    `validation_csv`: the check of the model, the fits, training at scale, and the assumptions."""
    if not validation_csv or not Path(validation_csv).exists():
        return None
    from distbench.predict.model import get_preset
    from distbench.predict.tables import validation_summary

    d = Path(validation_csv).parent
    fits, comm, training = (pd.read_csv(d / f) for f in ("alpha_beta.csv", "prediction_comm.csv",
                                                          "prediction_training.csv"))
    validation = pd.read_csv(validation_csv)
    findings, tables = [], {}
    if len(validation):
        vs = validation_summary(validation)
        rows = [[r["op"], r["timing"], r["backend"], f"{int(r['fit_world_size'])} -> {int(r['check_world_size'])}",
                 r["median_abs_err_pct_large"], r["max_abs_err_pct_large"], r["median_abs_err_pct"], r["max_abs_err_pct"]]
                for _, r in vs.sort_values(["backend", "op", "timing"]).iterrows()]
        tables["validation"] = _table(["op", "timing", "backend", "fit -> checked ranks", "median |error| >= 1 MiB (%)",
                                       "max >= 1 MiB (%)", "median |error| all sizes (%)", "max all sizes (%)"], rows)
        big = validation[validation["size_bytes"] >= 2**20]["rel_err_pct"].abs()
        if len(big):
            findings.append(f"The model, fitted on the smallest world size and checked against the larger measured ones: "
                            f"median |error| {big.median():.1f}% at >= 1 MiB (max {big.max():.1f}%, {len(big)} points); "
                            f"{validation['rel_err_pct'].abs().median():.1f}% over all sizes.")
    if len(fits):
        rows = [[r["op"], r["timing"], r["backend"], int(r["world_size"]), r.get("alpha_fixed_us"), r.get("alpha_hop_us"),
                 r["link_beta_gbps"], r["max_rel_err_pct"]]
                for _, r in fits.sort_values(["backend", "op", "timing", "world_size"]).iterrows()]
        tables["fits"] = _table(["op", "timing", "backend", "ranks", "alpha fixed (µs)", "alpha per hop (µs)",
                                 "busbw asymptote (GB/s)", "max |residual| (%)"], rows)
    ar8 = comm[(comm["op"] == "all_reduce") & (comm["gpus"] == 8) & (comm["intra_source"] == "measured")
               & (comm["backend"] == "nccl") & (comm["algorithm"] == "ring")] if len(comm) else comm
    if len(ar8):
        top = ar8[ar8["size_bytes"] == ar8["size_bytes"].max()]
        lo, hi = PUBLISHED_8GPU_ALLREDUCE_BUSBW_GBPS
        findings.append(f"8 GPUs on NVLink, all_reduce at {int(top['size_bytes'].iloc[0]) / 2**20:g} MiB from the measured "
                        f"link: {top['busbw_gbps'].min():.0f}-{top['busbw_gbps'].max():.0f} GB/s busbw predicted "
                        f"(by timing mode and fitted world size); published for 8x H100/H200 with NVLS off: {lo:.0f}-{hi:.0f} GB/s.")
    if len(training):
        t = training[training["efficiency"].notna()]
        gpus = sorted(t["gpus"].unique())
        rows = []
        for key, g in t.groupby(["model", "strategy", "config"], sort=True):
            eff = g.set_index("gpus")["efficiency"]
            rows.append([*key, int(g["ref_world_size"].iloc[0]), *[_pct(eff.get(n)) for n in gpus]])
        tables["training"] = _table(["model", "strategy", "config", "measured up to", *[f"{n} GPUs" for n in gpus]], rows)
    preset = get_preset(comm["preset"].iloc[0]) if len(comm) else None
    note = ("Hockney model per series: t = alpha + S / beta, beta the bus-bandwidth asymptote of the largest sizes and "
            "alpha the small-size floor, split into a fixed per-op cost and a per-hop latency (from the world sizes "
            "measured, or the preset's); ring costs at N ranks, hierarchical (intra-node reduce-scatter, inter-node "
            "all-reduce per rail, intra-node all-gather) beyond one node; training step = compute-only + the modelled "
            "gradient communication less the overlap measured at the largest world size. It breaks between about "
            "512 KiB and 32 MiB (NCCL's protocol switches), where it predicts too fast, and for send_recv. "
            "distbench/predict/model.py has every formula.")
    if preset is not None:
        note += f" Preset {preset.name}: {preset.source}"
    return {"findings": findings, "tables": tables, "note": note}


def _traces(trace_csv, training_summary) -> dict | None:
    """Traces on request (config profile): per profiled job, where its traces are and the overlap
    they show (HTA's definition, distbench.traces.overlap), beside the training family's own
    step-time overlap for the same job."""
    if not trace_csv or not Path(trace_csv).exists():
        return None
    t = pd.read_csv(trace_csv, dtype={"job": "string", "trace": "string", "note": "string", "mode": "string"})
    if t.empty:
        return None
    step_overlap = {}
    if training_summary and Path(training_summary).exists():
        s = pd.read_csv(training_summary)
        step_overlap = {f"{r['backend']}/{r['model']}/ws{int(r['world_size'])}/{r['config']}": r["overlap_fraction"]
                        for _, r in s.iterrows()} if {"model", "config"} <= set(s.columns) else {}
    headers = ["family", "job", "mode", "ranks traced", "overlap in the trace (median over ranks)",
               "overlap by step times", "traces"]
    rows = []
    for (family, job), g in t.groupby(["family", "job"], sort=True):
        traced = g[g["trace"].fillna("") != ""]
        ov = traced["overlap_fraction"].dropna()
        files = [f"../{p}" for p in traced["trace"]]
        rows.append([family, job, g["mode"].iloc[0], len(traced), _pct(ov.median()) if len(ov) else None,
                     _pct(step_overlap.get(job)) if family == "training" and job in step_overlap else None,
                     " ".join(files) if files else (g["note"].iloc[0] or None)])
    return {"table": _table(headers, rows),
            "note": ("Each trace is a short extra pass after the job's timed passes (never inside them); open it at "
                     "ui.perfetto.dev. Overlap in the trace = time computing while communicating / time communicating "
                     "(Holistic Trace Analysis' definition; GPU: NCCL kernels, ncclDevKernel_* and older names, "
                     "against the other kernels; CPU: Gloo's gloo:* collectives against aten:: ops). Overlap by step "
                     "times = 1 - exposed communication / the gradient all-reduce alone (the training table).")}


def snakemake_run_started(workdir=".") -> datetime | None:
    """When the Snakemake run rendering the report started: the newest log in .snakemake/log is
    that run's, named after its start in local time (2026-11-26T144052.658292.snakemake.log)."""
    logs = sorted(Path(workdir, ".snakemake", "log").glob("*.snakemake.log"))
    if not logs:
        return None
    try:
        return datetime.strptime(logs[-1].name.split(".snakemake")[0], "%Y-%m-%dT%H%M%S.%f").astimezone()
    except ValueError:
        return None


def _cache_state(placements, run_started) -> dict | None:
    """Per benchmark job: made by this run or reused from an earlier one, when, on which host and
    at which commit (the provenance the launcher adds to each job's placement file)."""
    if not placements:
        return None
    headers = ["job", "results", "finished (UTC)", "host", "commit", "outcome"]
    rows, reused, commands = [], 0, []
    for path in map(Path, placements):
        try:
            prov = json.loads(path.read_text()).get("provenance") or {}
        except (OSError, ValueError):
            prov = {}
        # results/<label>/<family>/...: the job is what follows the label
        job = "/".join(path.parts[2:-1]) if path.parts[:1] == ("results",) else str(path.parent)
        finished = prov.get("finished")
        when = datetime.fromisoformat(prov["started"]) if prov.get("started") else None
        if when is None or run_started is None:
            state = "unknown (no provenance)" if when is None else "—"
        elif when < run_started - timedelta(seconds=1):  # older provenance kept whole seconds only
            state, reused = "reused from an earlier run", reused + 1
        else:
            state = "this run"
        commit = prov.get("commit") or "—"
        commands += [f"# {job}\n{c}" for c in prov.get("commands") or []]
        rows.append([job, state, (finished or "—").replace("T", " ").replace("+00:00", ""), prov.get("host") or "—",
                     commit[:12] + ("-dirty" if commit.endswith("-dirty") and len(commit) > 12 else ""),
                     (prov.get("outcome") or "—")[:120]])
    note = (f"{len(rows)} benchmark job(s): {reused} reused from earlier runs (Snakemake's cache), "
            f"{len(rows) - reused} made by this run" if run_started else f"{len(rows)} benchmark job(s)")
    return {"table": _table(headers, rows), "commands": "\n".join(commands),
            "note": note + ". A job reruns when its parameters change or its outputs are deleted (README, Caching "
                           "and reruns)."}


def _regressions(config: dict | None, summary_csv, training_summary, memory_summary) -> dict | None:
    """Against report.baseline: the figures that moved beyond their noise and the threshold."""
    opts = (config or {}).get("report") or {}
    if not opts.get("baseline"):
        return None
    from distbench.report.regressions import DEFAULT_THRESHOLD_PCT, compare

    threshold = float(opts.get("regression_threshold_pct") or DEFAULT_THRESHOLD_PCT)
    table = compare({"comm_summary.csv": summary_csv, "training_summary.csv": training_summary,
                     "memory_summary.csv": memory_summary}, opts["baseline"], threshold)
    flagged = table[table["flagged"]]

    def value(family, x):
        return {"comm": human_time_us(x), "training": human_time_us(1e3 * x)}.get(family) or human_bytes(int(x))
    rows = [[r["family"], r["what"], value(r["family"], r["baseline"]), value(r["family"], r["now"]),
             f"{r['change_pct']:+.1f}%", r["direction"], r["why"]]
            for _, r in flagged.sort_values("change_pct", key=abs, ascending=False).iterrows()]
    return {"baseline": str(opts["baseline"]),
            "note": (f"{len(table)} figure(s) present in both runs compared; {len(flagged)} moved by more than "
                     f"{threshold:g}% and beyond their p5-p95 noise (memory: the threshold alone)."),
            "table": _table(["family", "what", "baseline", "now", "change", "direction", "why"], rows)}


def _runs(results_dir, run_label) -> dict | None:
    """Several hosts side by side (distbench.report.runs): only when results/ holds another run."""
    if not results_dir:
        return None
    from distbench.report.runs import load_runs, ratios, runs_table, side_by_side

    runs = load_runs(results_dir, first=run_label)
    if len(runs) < 2:
        return None
    first, *others = list(runs)
    return {"runs": _table(*runs_table(runs)), "side_by_side": _table(*side_by_side(runs)),
            # this run against each other one (with three hosts copied in, every pair with this run)
            "comparisons": [{"a": first, "b": b, "ratios": _table(*ratios(runs, first, b))} for b in others]}


def _shown_path(path: Path) -> str:
    """A path as the report names it: relative to the project (where Snakemake runs) when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _read_optional(path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path and Path(path).exists() and Path(path).stat().st_size else None


def _gpu_name(env: dict) -> str | None:
    gpus = env.get("gpus") or []
    return gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None


def _nvls(nccl: dict | None) -> bool | None:
    """Whether NCCL used NVLink SHARP (NVLS) channels, from the NCCL probe; None when unknown."""
    channels = ((nccl or {}).get("nvls") or {}).get("channels")
    return None if channels is None else channels > 0


def _straggler_lines(stragglers_csv) -> list[str]:
    if not stragglers_csv or not Path(stragglers_csv).exists():
        return []
    from distbench.comm.analysis.findings import straggler_findings

    return straggler_findings(pd.read_csv(stragglers_csv))


def _pair_lines(pairs_csv) -> list[str]:
    """The GPU-pair matrix's findings (distbench.comm.analysis.pairs): a pair well below its link class."""
    if not pairs_csv or not Path(pairs_csv).exists():
        return []
    from distbench.comm.analysis.pairs import pair_findings

    table = pd.read_csv(pairs_csv)
    return pair_findings(table) if len(table) else []


def build_context(summary_csv, largest_csv, env_json, figures, config, plan, out_md, extra=None,
                  figures_dir=None, training_summary=None, memory_summary=None, predict_validation=None,
                  stragglers_csv=None, pairs_csv=None, traces_csv=None, placements=None, run_started=None,
                  results_dir=None, run_label=None, full_tables=None, tables_dir=None) -> dict:
    summary = read_summary(summary_csv)
    largest = read_summary(largest_csv)
    env_path = Path(env_json)
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    peak = (extra or {}).get("peak")
    return {
        "title": "distbench benchmark report",
        # where this run's tables are (results/<label>/tables), named in the text
        "run_tables": _shown_path(Path(summary_csv).parent),
        "training": _training(training_summary),
        "memory": _memory(memory_summary),
        "prediction": _prediction(predict_validation),
        "traces": _traces(traces_csv, training_summary),
        "cache": _cache_state(placements, run_started),
        "topology": _topology_matrix((extra or {}).get("topology")),
        "regressions": _regressions(config, summary_csv, training_summary, memory_summary),
        "several_runs": _runs(results_dir, run_label),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "env": _env_table(env),
        "plan": _plan(plan or {}, summary),
        "verdict": headlines(summary, _read_optional(training_summary), _read_optional(memory_summary),
                             gpu_name=_gpu_name(env), peak=peak, nvls=_nvls((extra or {}).get("nccl"))),
        "pivots": _pivots(summary),
        "rank_agg": "/".join(sorted(set(summary["rank_agg"].dropna().astype(str)))) if "rank_agg" in summary else "",
        "config_yaml": yaml.safe_dump(config or {}, sort_keys=False, allow_unicode=True).rstrip(),
        "findings": (_straggler_lines(stragglers_csv) + _pair_lines(pairs_csv)
                     + compute_findings(summary, plan, peak=peak)),
        "largest": _largest_table(largest, peak),
        "compact": _compact_table(summary),
        "nodes": _nodes_table(largest),
        "traffic": _traffic_table(largest),
        "problems": _problem_table(summary),
        "figures": _figures(figures, _figures_dir(out_md, figures_dir), Path(out_md)),
        "full_tables": _full_tables(full_tables, Path(out_md), _tables_dir(out_md, tables_dir)),
        "extras": _extras(extra),
    }


def render_report(summary_csv, largest_csv, env_json, figures: list[Path], config: dict, plan: dict,
                  out_md, out_html, extra: dict | None = None, figures_dir=None, training_summary=None,
                  memory_summary=None, predict_validation=None, stragglers_csv=None, pairs_csv=None,
                  traces_csv=None, placements=None, run_started=None, results_dir=None, run_label=None,
                  full_tables=None, tables_dir=None) -> None:
    """Write the Markdown report, the figures and tables it links and the self-contained HTML one.

    The figures are copied into figures_dir (default: figures/ beside out_md) and the full tables
    (`full_tables`, default: the largest-size and summary tables given) into tables_dir (default:
    tables/ beside out_md), all linked relative to out_md, so the directory holding them can be copied
    elsewhere; the HTML inlines the figures as data: URIs and holds the tables collapsed.
    Both texts are rendered before anything is written, and every write is atomic.
    """
    figures_dir = _figures_dir(out_md, figures_dir)
    tables_dir = _tables_dir(out_md, tables_dir)
    full_tables = [largest_csv, summary_csv] if full_tables is None else full_tables
    ctx = build_context(summary_csv, largest_csv, env_json, figures, config, plan, out_md, extra, figures_dir,
                        training_summary, memory_summary, predict_validation, stragglers_csv, pairs_csv, traces_csv,
                        placements, run_started, results_dir, run_label, full_tables, tables_dir)
    env = _environment()
    md = env.get_template("report.md.j2").render(**ctx)
    html = env.get_template("report.html.j2").render(**ctx)
    _publish_files([p for f in ctx["figures"] for p in f["files"]], figures_dir)
    _publish_files([Path(t["source"]) for t in ctx["full_tables"]], tables_dir)
    atomic_write_text(out_md, md)
    atomic_write_text(out_html, html)
