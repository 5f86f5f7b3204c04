"""Computed, plain-language findings from comm_summary.csv, plus the helpers plots and report share.

Every sentence is built from numbers in the table; a sentence whose data are missing is not emitted.
The "primary" selection (one timing/dtype/nccl_env/inplace per backend) lives here so that the
figures, the tables and the sentences all describe the same rows.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from distbench.core.units import human_bytes, human_time_us, sig3 as _sig3  # noqa: F401 - re-exported for plots and report

from distbench.core.choices import backend_name  # noqa: F401 - used here and by the comm plots
from distbench.comm.analysis.summary import SUMMARY_COLUMNS  # the summary's columns, in its order
from distbench.comm.contract import host_bound
from distbench.core.contract import to_bool
from distbench.core.section import SMOKE_TEST, oversubscribed, ranks_per_host

TIMING_PREFERENCE = ("events", "graph", "host")  # device-side timing first: it excludes host overhead
REFERENCE_SIZE = 1e8  # "about 100 MB": large enough to be bandwidth-bound on every link
STATUS_PHRASES = {
    "oom": "ran out of memory",
    "skipped": "were skipped",
    "not_run": "were not reached (their job ended early)",
    "failed": "failed",
    "hung": "hung (a rank stopped responding; the report's Hung jobs names it)",
    "timeout": "ran past the job's time limit while still progressing (slow, not hung)",
    "wrong": "returned WRONG results",
}


# ---------------------------------------------------------------- loading and selection
def normalise_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Types the summary as the report expects; idempotent, so callers may pass a raw read_csv."""
    df = df.copy()
    # summaries written before multi-node jobs and all_to_all_v: one node, no traffic matrix
    for col, value in (("nodes", 1), ("traffic", "none")):
        if col not in df:
            df.insert(min(list(SUMMARY_COLUMNS).index(col), len(df.columns)), col, value)
        df[col] = df[col].astype("object").fillna(value)
    if "size_bytes" in df:  # summaries from before requested_bytes: the measured size
        if "requested_bytes" not in df:
            df.insert(min(list(SUMMARY_COLUMNS).index("requested_bytes"), len(df.columns)), "requested_bytes",
                      df["size_bytes"])
        df["requested_bytes"] = df["requested_bytes"].fillna(df["size_bytes"])
    for col in ("backend", "op", "traffic", "dtype", "nccl_env", "timing", "rank_agg", "status", "message"):
        if col in df:
            df[col] = df[col].astype("string")
    if "message" in df:
        df["message"] = df["message"].fillna("")
    if "nccl_env" in df:
        df["nccl_env"] = df["nccl_env"].fillna("default")
    for col in ("world_size", "nodes", "size_bytes", "requested_bytes"):
        if col in df:
            df[col] = pd.to_numeric(df[col]).astype("int64")
    for col in ("busiest_rank", "busiest_rank_bytes"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    for col in ("inplace", "correct"):
        if col in df:
            df[col] = df[col].map(to_bool).astype("boolean")
    if "inplace" in df:
        df["inplace"] = df["inplace"].fillna(False)
    for col in SUMMARY_COLUMNS:
        if col.startswith(("time_us", "algbw", "busbw", "rank_spread", "host_issue")) and col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    if "time_us_median" in df:
        # summaries from before the host's issue time: not measured, so no point is called host-bound
        if "host_issue_us_median" not in df:
            df.insert(min(list(SUMMARY_COLUMNS).index("host_issue_us_median"), len(df.columns)),
                      "host_issue_us_median", float("nan"))
        # derived, so recomputed: one definition (distbench.comm.contract.host_bound) for every reader
        df["host_bound"] = pd.Series([host_bound(t, i) for t, i in zip(df["time_us_median"], df["host_issue_us_median"])],
                                     index=df.index, dtype="bool")
    return df


def read_summary(path) -> pd.DataFrame:
    """Read comm_summary.csv / comm_largest.csv; a missing or empty file gives an empty table."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return normalise_summary(pd.DataFrame({c: [] for c in SUMMARY_COLUMNS}))
    return normalise_summary(pd.read_csv(path))


def _first_present(values, preferred):
    """The first preferred value present in `values`, else the first value in order of appearance."""
    present = list(dict.fromkeys(values.dropna().tolist()))
    for p in preferred:
        if p in present:
            return p
    return present[0] if present else None


PRIMARY = {  # column -> preference order for the "primary" value per backend
    "timing": TIMING_PREFERENCE,
    "dtype": ("float32",),
    "nccl_env": ("default",),
    "inplace": (False,),
    "traffic": ("none", "uniform"),  # all_to_all_v: uniform in the main tables; its skews have their own
}
_PER_OP = ("inplace", "traffic")  # chosen per op: they exist for some ops only


def primary_rows(df: pd.DataFrame, vary=(), ok_only: bool = True) -> pd.DataFrame:
    """Per backend, keep the primary timing, dtype, nccl_env and inplace, except the columns in `vary`.

    Chosen per backend because backends legitimately differ (Gloo has only host timing).
    """
    if ok_only:
        df = df[df["status"] == "ok"]
    parts = []
    for _, g in df.groupby("backend", sort=True):
        for col, pref in PRIMARY.items():
            if col not in vary and col not in _PER_OP and col in g:
                g = g[g[col] == _first_present(g[col], pref)]
        for col in _PER_OP:
            if col in vary or col not in g or not len(g):
                continue
            # Per op: torch's all_reduce and broadcast exist only in place, the others only out of
            # place; only all_to_all_v has traffic matrices.
            g = pd.concat([o[o[col] == _first_present(o[col], PRIMARY[col])] for _, o in g.groupby("op", sort=False)])
        parts.append(g)
    if not parts:
        return df.iloc[0:0]
    return pd.concat(parts, ignore_index=True)


def pick_op(ops, preferred: str = "all_reduce"):
    ops = list(dict.fromkeys(ops))
    return preferred if preferred in ops else (ops[0] if ops else None)


def closest_size(sizes, target: float = REFERENCE_SIZE):
    """The measured size closest to `target` on a log scale (128 MiB beats 64 MiB for 100 MB)."""
    sizes = [int(s) for s in sizes if s > 0]
    return min(sizes, key=lambda s: (abs(math.log(s / target)), s)) if sizes else None


def _one(df: pd.DataFrame, **eq):
    for k, v in eq.items():
        df = df[df[k] == v]
    return df.iloc[0] if len(df) else None


# ---------------------------------------------------------------- host-bound points
HOST_BOUND = "host-bound"
HOST_COST = "torch's per-call host cost, not link latency"


def is_host_bound(r) -> bool:
    """A summary row whose time is the host's per-call cost (normalise_summary's host_bound)."""
    return to_bool(r.get("host_bound")) is True


def time_text(r) -> str:
    """A row's median time as a sentence quotes it, labelled when it is the host's cost, not the GPU's."""
    text = human_time_us(r["time_us_median"])
    return f"{text} ({HOST_BOUND})" if is_host_bound(r) else text


def host_bound_findings(summary: pd.DataFrame) -> list[str]:
    """Per backend, timing and world size: the device-timed points whose time per op is no more than
    the host's time to issue one (distbench.comm.contract.host_bound), up to which size, with an
    example and the graph timing of the same point where it was measured and is not host-bound."""
    p = primary_rows(summary, vary=("timing",))
    if p.empty or "host_bound" not in p:
        return []
    out = []
    keys = ["backend", "timing", "world_size", "nodes"]
    for (backend, timing, ws, nodes), g in p.groupby(keys, sort=True):
        hb = g[g["host_bound"]]
        if hb.empty:
            continue
        op = pick_op(hb["op"].unique())
        r = hb[hb["op"] == op].sort_values("size_bytes").iloc[0]
        where = f"world size {ws}" + (f" on {nodes} nodes" if nodes > 1 else "")
        text = (f"{backend_name(backend)} {timing} timing is {HOST_BOUND} up to {human_bytes(int(hb['size_bytes'].max()))} "
                f"({len(hb)} of {len(g)} points, {where}; e.g. {op} at {human_bytes(int(r['size_bytes']))}: "
                f"{human_time_us(r['time_us_median'])} per op, and the host took "
                f"{human_time_us(r['host_issue_us_median'])} to issue each): those times are {HOST_COST}")
        graph = p[(p["timing"] == "graph") & (p["backend"] == backend) & (p["world_size"] == ws)
                  & (p["nodes"] == nodes) & (p["op"] == op) & (p["size_bytes"] == r["size_bytes"])]
        if timing != "graph" and len(graph) and not graph["host_bound"].iloc[0]:
            text += f"; graph timing there: {human_time_us(graph['time_us_median'].iloc[0])}."
        elif timing != "graph":
            text += "; graph timing (config comm.timing) measures the GPU's side."
        else:
            text += "; more ops per graph (iters) or graph_launches amortise the launch."
        out.append(text)
    return out


# ---------------------------------------------------------------- sentences
def _backend_ratio(p: pd.DataFrame) -> list[str]:
    if p["backend"].nunique() < 2:
        return []
    backends = sorted(p["backend"].unique())
    fast_pair = [b for b in ("nccl", "gloo") if b in backends]
    a, b = fast_pair if len(fast_pair) == 2 else backends[:2]
    common_ops = [o for o in p["op"].unique() if o != "barrier"
                  and {a, b} <= set(p.loc[p["op"] == o, "backend"])]
    op = pick_op(common_ops)
    if op is None:
        return []
    q = p[p["op"] == op]
    keys_a = set(zip(q.loc[q["backend"] == a, "world_size"], q.loc[q["backend"] == a, "size_bytes"]))
    keys_b = set(zip(q.loc[q["backend"] == b, "world_size"], q.loc[q["backend"] == b, "size_bytes"]))
    common = keys_a & keys_b
    size = closest_size({s for _, s in common})
    if size is None:
        return []
    ws = max(w for w, s in common if s == size)  # most ranks: closest to the use case
    ra, rb = _one(q, backend=a, world_size=ws, size_bytes=size), _one(q, backend=b, world_size=ws, size_bytes=size)
    (fast, rf), (slow, rs) = sorted([(a, ra), (b, rb)], key=lambda x: x[1]["time_us_median"])
    tf, ts = rf["time_us_median"], rs["time_us_median"]
    return [f"{backend_name(fast)} is {ts / tf:.1f}× faster than {backend_name(slow)} for {op} at "
            f"{human_bytes(size)} (world size {ws}: {time_text(rf)} vs {time_text(rs)})."]


def _peak_busbw(p: pd.DataFrame, peak: dict | None) -> list[str]:
    # one rank moves nothing between processes (busbw is 0 by definition): no peak is named there
    bw = p[(p["op"] != "barrier") & p["busbw_gbps_median"].notna() & (p["world_size"] >= 2)]
    by_size: dict[int, list[str]] = {}
    for op, g in bw.groupby("op", sort=False):
        size = int(g["size_bytes"].max())
        r = g[g["size_bytes"] == size].sort_values("busbw_gbps_median").iloc[-1]
        text = (f"{op} {r['busbw_gbps_median']:.1f} GB/s on {backend_name(r['backend'])}, "
                f"world size {r['world_size']} ({r['timing']} timing)")
        if peak and peak.get("peak_gbps") and r["backend"] == "nccl":
            text += f", {100 * r['busbw_gbps_median'] / float(peak['peak_gbps']):.0f}% of the " \
                    f"{float(peak['peak_gbps']):g} GB/s {peak.get('link') or 'link'} peak"
        by_size.setdefault(size, []).append(text)
    return [f"Peak busbw at the largest size ({human_bytes(s)}): " + "; ".join(t) + "."
            for s, t in sorted(by_size.items(), reverse=True)]


def _scaling(p: pd.DataFrame, env: dict | None = None) -> list[str]:
    """How the headline op's time changes from the smallest to the largest world size; on a host
    with fewer cores than the largest Gloo job's ranks that is contention, so it says so."""
    out = []
    for backend, g in p.groupby("backend", sort=True):
        op = pick_op([o for o in g["op"].unique() if o != "barrier"])
        g = g[g["op"] == op]
        if g["world_size"].nunique() < 2:
            continue
        lo, hi = int(g["world_size"].min()), int(g["world_size"].max())
        # the requested size: a split op's measured size differs between world sizes
        size = closest_size(set(g.loc[g["world_size"] == lo, "requested_bytes"])
                            & set(g.loc[g["world_size"] == hi, "requested_bytes"]))
        if size is None:
            continue
        r_lo, r_hi = _one(g, world_size=lo, requested_bytes=size), _one(g, world_size=hi, requested_bytes=size)
        t_lo, t_hi = r_lo["time_us_median"], r_hi["time_us_median"]
        r = t_hi / t_lo
        change = f"grows {r:.1f}×" if r >= 1 else f"falls {1 / r:.1f}×"
        crowded = oversubscribed(ranks_per_host(g, hi, "nodes"), str(backend), env or {})
        out.append(f"{backend_name(backend)} {op} time {change} from {lo} to {hi} ranks at "
                   f"{human_bytes(size)} ({time_text(r_lo)} vs {time_text(r_hi)})"
                   + (f"; {SMOKE_TEST.format(crowded)}." if crowded else "."))
    return out


def _timing_overhead(summary: pd.DataFrame) -> list[str]:
    """Compare timing modes at the smallest size, where launch/sync overhead dominates."""
    p = primary_rows(summary, vary=("timing",))
    out = []
    for backend, g in p.groupby("backend", sort=True):
        op = pick_op(g["op"].unique())
        g = g[g["op"] == op]
        for other, template in (
            ("graph", "CUDA-graph timing {verb} {d} of launch overhead at {size} "
                      "(events {te} vs graph {to}; {where})."),
            ("host", "Host-clock timing adds {d} per op at {size} over CUDA events "
                     "(host {to} vs events {te}; {where}): synchronisation overhead, not network time."),
        ):
            ev, ot = g[g["timing"] == "events"], g[g["timing"] == other]
            common = set(zip(ev["world_size"], ev["size_bytes"])) & set(zip(ot["world_size"], ot["size_bytes"]))
            if not common:
                continue
            ws, size = min(common, key=lambda k: (k[1], k[0]))
            re_, ro = _one(ev, world_size=ws, size_bytes=size), _one(ot, world_size=ws, size_bytes=size)
            te, to = re_["time_us_median"], ro["time_us_median"]
            d = te - to if other == "graph" else to - te
            if d <= 0:  # say so rather than print a negative saving
                out.append(f"{other.capitalize()} timing shows no overhead difference from events at "
                           f"{human_bytes(size)} (events {time_text(re_)} vs {other} {time_text(ro)}; "
                           f"{backend_name(backend)} {op}, world size {ws}).")
                continue
            out.append(template.format(verb="removes", d=human_time_us(d), size=human_bytes(size),
                                       te=time_text(re_), to=time_text(ro),
                                       where=f"{backend_name(backend)} {op}, world size {ws}"))
    return out


def _describe(r) -> str:
    return (f"{r['op']} {backend_name(r['backend'])} ws {r['world_size']} {r['dtype']} "
            f"{r['timing']} at {human_bytes(r['size_bytes'])}")


def _why(rows: pd.DataFrame, limit: int = 2) -> str:
    """' (reason; reason)': the distinct messages of skipped rows, most frequent first, so the plan says why
    a point was not measured (e.g. a size too small to give every rank one element); '' where none."""
    msgs = [m for m in rows["message"].astype("string").fillna("").str.strip() if m]
    if not msgs:
        return ""
    counts = pd.Series(msgs).value_counts()
    shown = list(counts.index[:limit])
    more = f"; {len(counts) - limit} other reason(s)" if len(counts) > limit else ""
    return f" ({'; '.join(shown)}{more})"


def _problems(summary: pd.DataFrame, limit: int = 4) -> list[str]:
    out = []
    bad = summary[summary["status"] != "ok"]
    for status in ["wrong"] + [s for s in STATUS_PHRASES if s != "wrong"]:
        rows = bad[bad["status"] == status]
        if rows.empty:
            continue
        examples = [_describe(r) for _, r in rows.head(limit).iterrows()]
        more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
        n = len(rows)
        noun = "measurement" if n == 1 else "measurements"
        verb = STATUS_PHRASES[status]
        if n == 1:
            verb = verb.replace("were ", "was ")
        line = f"{n} {noun} {verb}{_why(rows) if status == 'skipped' else ''}: {', '.join(examples)}{more}."
        if status == "wrong":
            line = f"⚠ CORRECTNESS FAILURE: {line} Do not trust these numbers."
        out.append(line)
    return out


def skipped_points(summary_df: pd.DataFrame, limit: int = 4) -> list[str]:
    """The measurements skipped by design (e.g. send_recv at one rank), for the plan section."""
    summary = normalise_summary(summary_df)
    return _problems(summary[summary["status"] == "skipped"], limit)


def compute_findings(summary_df: pd.DataFrame, plan: dict | None = None, *, peak: dict | None = None,
                     env: dict | None = None) -> list[str]:
    """Short sentences with numbers; `peak` (extra['peak']) adds % of link peak for NCCL; `env`
    (env.json) marks scaling on a host with fewer cores than ranks as a smoke test."""
    summary = normalise_summary(summary_df)
    plan = plan or {}
    p = primary_rows(summary)
    # skipped points (not applicable by design) belong to the plan, not the findings
    out = _problems(summary[summary["status"] != "skipped"])
    out += [f"Not measured: {s['what']} — {s['why']}." for s in plan.get("skipped") or []
            if str(s.get("what", "")).startswith("backend ")]
    if not p.empty:
        out += (_backend_ratio(p) + _peak_busbw(p, peak) + _scaling(p, env) + _timing_overhead(summary)
                + host_bound_findings(summary))
    return out + traffic_findings(summary)


def traffic_findings(summary: pd.DataFrame) -> list[str]:
    """all_to_all_v: per skewed matrix, at the largest size it ran beside a uniform one, how much
    longer the exchange took and at what rate the busiest rank's links ran, against uniform."""
    v = primary_rows(summary, vary=("traffic",))
    v = v[v["op"] == "all_to_all_v"] if len(v) else v
    lines = []
    for (backend, ws, nodes), g in v.groupby(["backend", "world_size", "nodes"], sort=True) if len(v) else []:
        uniform = g[g["traffic"] == "uniform"].set_index("size_bytes")
        for traffic, t in g[g["traffic"] != "uniform"].groupby("traffic", sort=True):
            both = t[t["size_bytes"].isin(uniform.index)]
            if both.empty:
                continue
            r = both.loc[both["size_bytes"].idxmax()]
            u = uniform.loc[r["size_bytes"]]

            def rate(x):
                return x["busiest_rank_bytes"] / (x["busiest_rank_time_us_median"] * 1e3)
            share = r["busiest_rank_bytes"] / u["busiest_rank_bytes"]
            where = f"{int(ws)} ranks" + (f" on {int(nodes)} nodes" if nodes > 1 else "")
            lines.append(
                f"all_to_all_v under {traffic} ({backend_name(backend)}, {where}, {human_bytes(r['size_bytes'])}): "
                f"{r['time_us_median'] / u['time_us_median']:.2f}x the uniform matrix's time; its busiest rank "
                f"({int(r['busiest_rank'])}) moves {share:.2f}x a uniform rank's bytes at {rate(r):.3g} GB/s, "
                f"{100 * rate(r) / rate(u):.0f}% of the uniform rate.")
    return lines


def straggler_findings(stragglers: pd.DataFrame) -> list[str]:
    """One line per comm job with a straggler (distbench.comm.analysis.summary.stragglers)."""
    lines = []
    for _, r in stragglers[stragglers["straggler"].astype(bool)].iterrows() if len(stragglers) else []:
        nodes = int(r["nodes"]) if pd.notna(r["nodes"]) else 1
        where = f"{int(r['world_size'])} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
        lines.append(f"Straggler: rank {int(r['last_rank'])} was ready last in {100 * r['last_share']:.0f}% of the "
                     f"{int(r['n_trials'])} timed trials of the {backend_name(r['backend'])} {r['dtype']} job at {where} "
                     f"({r['nccl_env']}): the first rank waited {human_time_us(r['arrival_skew_us_median'])} for it "
                     f"(median), against a median trial of {human_time_us(r['trial_us_median'])}. Its host is slower "
                     "or busier than the others (check its CPU load, clocks and affinity).")
    return lines
