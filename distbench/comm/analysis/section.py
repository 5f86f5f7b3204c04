"""Communication's report sections: the per-op tables (pivots), within one node and across nodes,
all_to_all_v by traffic matrix, the full largest-size table, the measurements that did not succeed,
its headlines (distbench.comm.analysis.headlines) and its Findings (stragglers, GPU pairs, then the
sweep's findings). Fragments: templates/communication.*.j2 and templates/problems.*.j2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.comm.analysis.findings import (
    HOST_BOUND, HOST_COST, SUMMARY_COLUMNS, TIMING_PREFERENCE, compute_findings, human_bytes, human_time_us,
    is_host_bound, normalise_summary, primary_rows, read_summary, skipped_points, straggler_findings,
)
from distbench.comm.analysis.headlines import GLOO_ON_GPU_NODE, HOST_COST_LABEL, comm_headlines, gpu_side_rows, graph_mixing
from distbench.comm.analysis.pairs import pair_findings
from distbench.comm.analysis.runs import ACROSS_RUNS
from distbench.core.ops_spec import SPECS
from distbench.core.section import Measure, ReportInputs, Section, SummaryPart, gbps_cell, table, time_cell
from distbench.core.sizes import parse_size
from distbench.core.units import human_gbps

TEMPLATES = Path(__file__).parent / "templates"
MAX_SIZES_PER_OP = 12  # compact summary: evenly spaced sizes, first and last always kept

FIGURE_TITLES = {
    "time_vs_size": "Time per op vs message size",
    "busbw_vs_size": "Bus bandwidth vs message size",
    "backend_comparison_100mb": "Backends compared at about 100 MB",
    "timing_modes": "Timing modes (events, CUDA graph, host clock)",
    "nccl_env": "NCCL environment sweep",
    "dtype": "Bus bandwidth by dtype",
}
# The full comm tables the Markdown links (copies in tables/ beside it; the HTML has them collapsed).
FULL_TABLES = {"comm_largest.csv": "each series at its largest size",
               "comm_summary.csv": "every point, with % of the link peak and NCCL's algorithm",
               "comm.csv": "every trial"}


ROUNDED_MARK = "*"
MAX_ROUNDED_SHOWN = 3  # per footnote group: the first few requested -> measured sizes, then a count


def _exact(n: int) -> str:
    """A size as the rows print it, with its bytes where that text rounds: '2 KiB (2000 B)'."""
    text = human_bytes(n)
    return text if parse_size(text.replace(" ", "")) == n else f"{text} ({n} B)"


class Rounded:
    """One table's cells measured at another size than their row's requested one: `mark` flags such
    a cell with ROUNDED_MARK, `footnote` says why (a split op's buffer is world_size equal chunks
    of whole elements, so the count rounds down: distbench.core.ops_spec.element_count)."""

    def __init__(self):
        self.seen: dict[tuple, dict[int, int]] = {}  # (op, world_size, dtype) -> {requested: measured}

    def mark(self, r, text):
        requested, measured = int(r["requested_bytes"]), int(r["size_bytes"])
        if requested == measured:
            return text
        self.seen.setdefault((r["op"], int(r["world_size"]), r["dtype"]), {})[requested] = measured
        return f"{text} {ROUNDED_MARK}" if text else ROUNDED_MARK

    def footnote(self) -> str:
        groups: dict[tuple, list[str]] = {}  # ops that rounded the same sizes the same way share a line
        for (op, ws, dtype), sizes in self.seen.items():
            split = op in SPECS and SPECS[op].split_across_ranks
            groups.setdefault((ws if split else None, dtype, tuple(sorted(sizes.items()))), []).append(op)
        parts = []
        for (ws, dtype, sizes), ops in groups.items():
            why = (f"at {ws} ranks the buffer is split into {ws} equal chunks, so the size rounds down to a "
                   f"multiple of {ws} {dtype} elements" if ws else f"the size rounds down to whole {dtype} elements")
            shown = ", ".join(f"{_exact(req)} → {got} B" for req, got in sizes[:MAX_ROUNDED_SHOWN])
            more = f" and {len(sizes) - MAX_ROUNDED_SHOWN} more" if len(sizes) > MAX_ROUNDED_SHOWN else ""
            parts.append(f"{', '.join(ops)}: {why} ({shown}{more})")
        return f"{ROUNDED_MARK} measured at a smaller size than the row's: " + "; ".join(parts) + "." if parts else ""


HOST_BOUND_MARK = "†"


class HostBound:
    """One table's cells whose time is the host's per-call cost (distbench.comm.contract.host_bound):
    `mark` flags such a cell with HOST_BOUND_MARK, `footnote` says so with the host's issue time, so
    nobody reads an eager small-size figure as link latency."""

    def __init__(self):
        self.seen: dict[str, list[tuple[int, float]]] = {}  # timing -> [(requested size, host issue µs)]

    def mark(self, r, text):
        if not is_host_bound(r):
            return text
        self.seen.setdefault(str(r["timing"]), []).append((int(r["requested_bytes"]), float(r["host_issue_us_median"])))
        return f"{text} {HOST_BOUND_MARK}" if text else HOST_BOUND_MARK

    def footnote(self) -> str:
        def span(values, fmt):
            lo, hi = min(values), max(values)
            return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

        parts = [f"{timing} timing at {span([s for s, _ in seen], human_bytes)} (the host took "
                 f"{span([i for _, i in seen], human_time_us)} to issue each op)" for timing, seen in self.seen.items()]
        if not parts:
            return ""
        graph = "; graph timing shows the GPU's side" if set(self.seen) - {"graph"} else ""
        return (f"{HOST_BOUND_MARK} {HOST_BOUND}: {'; '.join(parts)}: the time per op is no more than the host's time "
                f"to issue one, so it is {HOST_COST}{graph}.")


GPU_SIDE_MARK = "‡"


class GpuSide:
    """One table's cells that show graph timing where events timing is host-bound (gpu_side_rows):
    `mark` flags such a cell with GPU_SIDE_MARK and puts torch's per-call host cost (the events time
    per op) beside it, labelled; `footnote` names the graph-mixing setting (`mixing`: nccl_env label ->
    text, distbench.comm.analysis.headlines.graph_mixing), so a reader compares it with nccl-tests' figure."""

    def __init__(self, mixing=graph_mixing):
        self.mixing = mixing
        self.seen: dict[str, list[tuple[int, float]]] = {}  # mixing text -> [(requested size, host issue µs)]

    def mark(self, r, text):
        if not bool(r.get("gpu_side", False)):
            return text
        self.seen.setdefault(self.mixing(r["nccl_env"]), []).append(
            (int(r["requested_bytes"]), float(r["host_cost_issue_us"])))
        return f"{text} {GPU_SIDE_MARK}" if text else GPU_SIDE_MARK

    @staticmethod
    def host_cost(r) -> str:
        """The cell's addition for a replaced point: torch's per-call host cost, labelled."""
        return f" · {HOST_COST_LABEL} {human_time_us(r['host_cost_us'])}" if bool(r.get("gpu_side", False)) else ""

    def footnote(self) -> str:
        def span(values, fmt):
            lo, hi = min(values), max(values)
            return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

        parts = [f"{span([s for s, _ in seen], human_bytes)} ({mixing})" for mixing, seen in self.seen.items()]
        if not parts:
            return ""
        issue = [i for seen in self.seen.values() for _, i in seen if pd.notna(i)]
        took = f"; the host took {span(issue, human_time_us)} to issue each op" if issue else ""
        off = ("; with graph mixing off ({NCCL_GRAPH_MIXING_SUPPORT: 0} in comm.nccl_env) it is NCCL's own latency, "
               "what nccl-tests prints" if any(m.startswith("graph mixing on") for m in self.seen) else "")
        return (f"{GPU_SIDE_MARK} graph timing (CUDA-graph replay: the GPU's time per op) where events timing is "
                f"{HOST_BOUND}: {'; '.join(parts)}{off}. \"{HOST_COST_LABEL}\" beside it is the events time per op "
                f"there, {HOST_COST}{took}.")


def _comm_table(inputs: ReportInputs, key: str) -> pd.DataFrame:
    """comm summary or largest table, normalised (read once); an empty one when missing."""
    t = inputs.table(key, read_summary)
    return t if t is not None else normalise_summary(pd.DataFrame({c: [] for c in SUMMARY_COLUMNS}))


def _peak(inputs: ReportInputs) -> dict | None:
    return (inputs.extra or {}).get("peak")


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
    rows, rounded, host = [], Rounded(), HostBound()
    for _, r in largest.sort_values(keys).iterrows():
        row = [r[k] for k in keys] + [rounded.mark(r, human_bytes(r["requested_bytes"])),
                                      host.mark(r, time_cell(r["time_us_median"])), gbps_cell(r["busbw_gbps_median"])]
        if spread:
            row.append(r["rank_spread_pct_median"])
        if peak_gbps:  # the link peak describes GPU links: meaningless for Gloo over TCP/shared memory
            bw = r["busbw_gbps_median"]
            row.append(f"{100 * bw / peak_gbps:.0f}%" if r["backend"] == "nccl" and pd.notna(bw) else None)
        rows.append(row)
    return _with_footnote(table(headers, rows), rounded, host)


def _with_footnote(t: dict, rounded: Rounded, host: HostBound | None = None, gpu: GpuSide | None = None) -> dict:
    t["footnote"] = " ".join(f for f in (rounded.footnote(), gpu.footnote() if gpu else "",
                                         host.footnote() if host else "") if f)
    return t


def _thin(sizes: list[int]) -> list[int]:
    if len(sizes) <= MAX_SIZES_PER_OP:
        return sizes
    step = (len(sizes) - 1) / (MAX_SIZES_PER_OP - 1)
    return sorted({sizes[round(i * step)] for i in range(MAX_SIZES_PER_OP)})


def _compact_table(summary: pd.DataFrame, primary: bool = True, mixing=graph_mixing) -> dict:
    """op × size rows, one column per (backend, world size): median time and busbw, primary timing
    (or the rows as given, primary=False)."""
    p = primary_rows(summary) if primary else summary[summary["status"] == "ok"]
    if p.empty:
        return table([], [])
    # a column per (backend, world size, nodes): a job across nodes is its own column, never merged
    # with a one-node job of the same size
    cols = sorted(set(zip(p["backend"], p["world_size"], p["nodes"])))
    # rows by the requested size: a split op measured at 6 ranks rounds 50 B down to 48 B, and its
    # cell belongs in the 50 B row beside the 2-rank job's (marked, with a footnote)
    cell = {(r["op"], r["requested_bytes"], r["backend"], r["world_size"], r["nodes"]): r for _, r in p.iterrows()}
    # a backend's timing; graph rows standing in for host-bound events points (gpu_side_rows) are marked
    replaced = p["gpu_side"].astype(bool) if "gpu_side" in p else pd.Series(False, index=p.index)
    timing = {b: (g.loc[~replaced[g.index], "timing"].iloc[0] if (~replaced[g.index]).any() else g["timing"].iloc[0])
              + (f"; {GPU_SIDE_MARK} graph" if replaced[g.index].any() else "") for b, g in p.groupby("backend")}
    headers = ["op", "size"] + [f"{b} ws{w}{f' on {n} nodes' if n > 1 else ''} ({timing[b]})" for b, w, n in cols]
    rows, total, rounded, host, gpu = [], 0, Rounded(), HostBound(), GpuSide(mixing)
    for op in dict.fromkeys(p["op"]):
        sizes = sorted(set(p.loc[p["op"] == op, "requested_bytes"]))
        total += len(sizes)
        for s in _thin(sizes):
            row = [op, human_bytes(s)]
            for b, w, n in cols:
                r = cell.get((op, s, b, w, n))
                if r is None:
                    row.append(None)
                    continue
                bw = r["busbw_gbps_median"]
                text = (gpu.mark(r, host.mark(r, time_cell(r["time_us_median"])))
                        + (f" · {human_gbps(bw)}" if pd.notna(bw) else "") + gpu.host_cost(r))
                row.append(rounded.mark(r, text))
            rows.append(row)
    t = _with_footnote(table(headers, rows), rounded, host, gpu)
    t["note"] = f"{len(rows)} of {total} op × size rows shown" if len(rows) < total else ""
    return t


def _pivots(summary: pd.DataFrame, mixing=graph_mixing) -> list[dict]:
    """One compact table per op: sizes as rows, one column per (backend, world size[, nodes]),
    each cell the median time and busbw; the best timing mode per backend first (CUDA events,
    else graph, else host; where events timing is host-bound and graph timing measured the point, the
    graph figure with torch's host cost beside it: gpu_side_rows), the other modes as further tables
    (collapsed in HTML). `mixing`: an nccl_env label -> its graph-mixing setting, in words."""
    out = []
    for op in dict.fromkeys(summary["op"]) if len(summary) else []:
        rows = summary[summary["op"] == op]
        modes = [t for t in TIMING_PREFERENCE if t in set(rows["timing"])]
        tables = []
        for i, mode in enumerate(modes):
            # the best mode: each backend's own first choice (Gloo has host only); then each mode alone
            pick = gpu_side_rows(rows, primary_rows(rows)) if i == 0 else primary_rows(rows[rows["timing"] == mode])
            if mode == modes[0] or len(pick):
                t = _compact_table(pick, primary=False, mixing=mixing)
                if t["rows"]:
                    tables.append({"timing": "best per backend" if i == 0 else mode, "table": t})
            if i == 0 and pick["gpu_side"].any():  # the events series as measured, host-bound cells and all
                t = _compact_table(primary_rows(rows[rows["timing"] == mode]), primary=False, mixing=mixing)
                if t["rows"]:
                    tables.append({"timing": mode, "table": t})
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
    rows, rounded, host = [], Rounded(), HostBound()
    for _, r in p.sort_values(["op", "backend", "nodes", "world_size"]).iterrows():
        n = int(r["nodes"])
        rows.append([r["op"], r["backend"], int(r["world_size"]), f"{n} × {int(r['world_size']) // n}",
                     "inter-node (network)" if n > 1 else "intra-node", rounded.mark(r, human_bytes(r["requested_bytes"])),
                     host.mark(r, time_cell(r["time_us_median"])), gbps_cell(r["busbw_gbps_median"])])
    return _with_footnote(table(headers, rows), rounded, host)


def _traffic_table(largest: pd.DataFrame) -> dict | None:
    """all_to_all_v per traffic matrix at its largest size: the average busbw, the busiest rank and
    its own link rate, and the time against the uniform matrix of the same job."""
    v = primary_rows(largest, vary=("traffic",))
    v = v[v["op"] == "all_to_all_v"] if "op" in v else v
    if v.empty:
        return None
    headers = ["traffic", "backend", "ws", "size", "time", "busbw GB/s", "busiest rank", "its bytes",
               "its time", "its rate GB/s", "time vs uniform"]
    uniform = {(r["backend"], r["world_size"], r["nodes"], r["requested_bytes"]): r["time_us_median"]
               for _, r in v[v["traffic"] == "uniform"].iterrows()}
    rows, rounded = [], Rounded()
    for _, r in v.sort_values(["backend", "world_size", "traffic"]).iterrows():
        own_us, own_bytes = r["busiest_rank_time_us_median"], r["busiest_rank_bytes"]
        rate = own_bytes / (own_us * 1e3) if pd.notna(own_bytes) and pd.notna(own_us) and own_us > 0 else None
        base = uniform.get((r["backend"], r["world_size"], r["nodes"], r["requested_bytes"]))
        rows.append([r["traffic"], r["backend"], int(r["world_size"]), rounded.mark(r, human_bytes(r["requested_bytes"])),
                     time_cell(r["time_us_median"]), gbps_cell(r["busbw_gbps_median"]),
                     None if pd.isna(r["busiest_rank"]) else int(r["busiest_rank"]),
                     None if pd.isna(own_bytes) else human_bytes(int(own_bytes)), time_cell(own_us), gbps_cell(rate),
                     f"{r['time_us_median'] / base:.2f}×" if base and r["traffic"] != "uniform" else None])
    return _with_footnote(table(headers, rows), rounded)


def _problem_table(summary: pd.DataFrame) -> dict | None:
    """The measurements that failed, ran out of memory, hung, timed out or were wrong; None (no section)
    where there are none. A point skipped by design (a size too small to give every rank an element, or
    send_recv at one rank) did not fail: the Plan names it with its reason (findings.skipped_points)."""
    bad = summary[~summary["status"].isin(["ok", "skipped"])]
    if bad.empty:
        return None
    rounded = Rounded()
    rows = [[r["status"], r["op"], r["backend"], r["world_size"], r["dtype"], r["nccl_env"], r["timing"],
             rounded.mark(r, human_bytes(r["requested_bytes"])), r["message"]] for _, r in bad.iterrows()]
    return _with_footnote(table(["status", "op", "backend", "ws", "dtype", "nccl_env", "timing", "size", "message"], rows),
                          rounded)


def _gpu_name(env: dict) -> str | None:
    gpus = env.get("gpus") or []
    return gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None


def _nvls(nccl: dict | None) -> bool | None:
    """Whether NCCL used NVLink SHARP (NVLS) channels, from the NCCL probe; None when unknown."""
    channels = ((nccl or {}).get("nvls") or {}).get("channels")
    return None if channels is None else channels > 0


def _job_env(inputs: ReportInputs) -> dict:
    return dict((inputs.config or {}).get("job_env") or {})


def _mixing(inputs: ReportInputs):
    """An nccl_env label -> its graph-mixing setting in words, from this run's config and env.json."""
    job_env, launcher = _job_env(inputs), inputs.env_dict().get("job_env")
    return lambda label: graph_mixing(label, job_env, launcher)


def headlines(inputs: ReportInputs) -> list:
    return comm_headlines(_comm_table(inputs, "comm_summary"), gpu_name=_gpu_name(inputs.env_dict()), peak=_peak(inputs),
                          nvls=_nvls((inputs.extra or {}).get("nccl")), env=inputs.env_dict(), job_env=_job_env(inputs),
                          gpus=inputs.node_gpus())


def cpu_processes_note(summary: pd.DataFrame, gpus: int | None) -> str:
    """On a GPU node whose table holds Gloo rows and no NCCL row: a note that these are CPU processes,
    not the GPUs (the one-GPU Verdict does not judge them: headlines.one_gpu_headline); else ''."""
    if not gpus or summary is None or summary.empty:
        return ""
    backends = set(summary["backend"].astype(str))
    if "nccl" in backends or "gloo" not in backends:
        return ""
    return GLOO_ON_GPU_NODE.format(s="s" if gpus > 1 else "", verb="were" if gpus > 1 else "was")


def findings(inputs: ReportInputs) -> list[str]:
    """The report's Findings: stragglers, GPU pairs well below their link class, then the sweep's."""
    stragglers = inputs.table("comm_stragglers")
    pairs = inputs.table("comm_pairs")
    summary = _comm_table(inputs, "comm_summary")
    sweep = compute_findings(summary, inputs.plan, peak=_peak(inputs), env=inputs.env_dict())
    if cpu_processes_note(summary, inputs.node_gpus()):  # a GPU node that measured Gloo only: say whose figures
        sweep = [f"{GLOO_FINDING_LABEL}: {f}" if "Gloo" in f else f for f in sweep]
    return ((straggler_findings(stragglers) if stragglers is not None else [])
            + (pair_findings(pairs) if pairs is not None and len(pairs) else []) + sweep)


# A Gloo finding of a GPU node without an NCCL row (one GPU): the Findings list, like the Communication
# section's note (GLOO_ON_GPU_NODE), never lets a Gloo figure read as the GPU's
GLOO_FINDING_LABEL = "CPU processes (Gloo), not the GPUs"


def skipped(inputs: ReportInputs) -> list[str]:
    summary = _comm_table(inputs, "comm_summary")
    return skipped_points(summary) if len(summary) else []


def build(inputs: ReportInputs) -> dict:
    summary, largest = _comm_table(inputs, "comm_summary"), _comm_table(inputs, "comm_largest")
    return {"pivots": _pivots(summary, _mixing(inputs)),
            "cpu_note": cpu_processes_note(summary, inputs.node_gpus()),
            "rank_agg": "/".join(sorted(set(summary["rank_agg"].dropna().astype(str)))) if "rank_agg" in summary else "",
            "largest": _largest_table(largest, _peak(inputs)),
            "nodes": _nodes_table(largest),
            "traffic": _traffic_table(largest)}


# Against a baseline run: the median time of every point, its p5-p95 as the noise (tables from before
# multi-node jobs and all_to_all_v: one node, no traffic matrix)
TIME = Measure("comm", "comm_summary.csv",
               ("backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
                "requested_bytes"),
               "time_us_median", "time_us_p5", "time_us_p95", unit="µs",
               defaults={"nodes": 1, "traffic": "none"})


def summary_settings(comm: pd.DataFrame | None, config: dict) -> dict:
    """summary.json's config: the comm jobs' settings, NCCL's where NCCL ran, else the Gloo ones (comm.gloo)."""
    ran_nccl = comm is not None and (comm["backend"] == "nccl").any()
    timing = config["comm"] if ran_nccl or comm is None else config["comm"]["gloo"]
    return {"warmup_iters": timing["warmup"], "benchmark_iters": timing["iters"], "trials": timing["trials"]}


# summary.json's results.communication: per op, one record per point
SUMMARY_FIELDS = ("backend", "world_size", "nodes", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
                  "requested_bytes", "time_us_median", "time_us_p5", "time_us_p95", "host_issue_us_median", "host_bound",
                  "algbw_gbps_median", "busbw_gbps_median",
                  "busiest_rank", "busiest_rank_bytes", "busiest_rank_time_us_median", "correct", "status")
SUMMARY = SummaryPart("communication", "comm_summary", SUMMARY_FIELDS, by="op",
                      order=("backend", "world_size", "dtype", "timing", "size_bytes"), settings=summary_settings,
                      reader=read_summary, schema=Path(__file__).with_name("summary.schema.json"))

COMMUNICATION = Section("communication", "Communication", TEMPLATES, build, headlines=headlines, findings=findings,
                        skipped=skipped, figure_dirs=("figures_comm", "figures_pairs"), figure_titles=FIGURE_TITLES,
                        full_tables=FULL_TABLES, regressions=(TIME,), summary=SUMMARY, across_runs=ACROSS_RUNS)
PROBLEMS = Section("problems", "Measurements that did not succeed", TEMPLATES,
                   lambda inputs: _problem_table(_comm_table(inputs, "comm_summary")))
