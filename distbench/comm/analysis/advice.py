"""Turn measurements and probes into plain-language advice, each item citing the numbers behind it.

Every rule is a small function `(ctx) -> list[dict]`; `advise` runs them all. An item is
{"severity": "info"|"warn"|"error", "text": one sentence with numbers, "evidence": {...}}.
Rules stay silent when their inputs are missing, so a CPU/gloo run gets only what applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from distbench.core.contract import to_bool
# busbw under LOW_PEAK_FRACTION of the link peak is suspicious: the gate holds runs to the same share
from distbench.core.references import LOW_PEAK_FRACTION, expected_for, reference_text
from distbench.core.sizes import human_bytes
from distbench.core.units import human_time_us

FAR_BELOW_EXPECTED = 0.80     # below this share of the published low figure is "far below"
CV_NOISY = 0.10               # coefficient of variation of per-trial times
LARGE_BYTES = 16 << 20        # "large" for the noise rule: at or above 16 MiB (or the largest size run)
SMALL_BYTES = 64 << 10        # "small" for the launch-overhead rule
HOST_OVER_EVENTS = 2.0        # host timing this many times the CUDA-event timing
HOST_MIN_GAP_US = 5.0         # ...and at least this many microseconds slower
_KEY = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "inplace", "size_bytes"]


@dataclass
class _Ctx:
    summary: pd.DataFrame
    env: dict | None
    topology: dict | None
    nccl: dict | None
    placement: list[dict] | None
    peak: dict | None


def _item(severity: str, text: str, **evidence) -> dict:
    return {"severity": severity, "text": text, "evidence": evidence}


def _ok(summary: pd.DataFrame) -> pd.DataFrame:
    if summary is None or summary.empty:
        return pd.DataFrame(columns=list(summary.columns) if summary is not None else [])
    return summary[summary["status"] == "ok"]


def _largest_per_op(df: pd.DataFrame) -> pd.DataFrame:
    """Per (backend, world_size, op, timing): the row at the largest size, with a busbw."""
    if df.empty:
        return df
    df = df[df["busbw_gbps_median"].notna()]
    if df.empty:
        return df
    idx = df.groupby(["backend", "world_size", "op", "timing"], dropna=False)["size_bytes"].idxmax()
    return df.loc[idx]


def _gpu_name(ctx: _Ctx) -> str | None:
    gpus = (ctx.env or {}).get("gpus") or []
    if gpus and gpus[0].get("name"):
        return gpus[0]["name"]
    names = (ctx.topology or {}).get("gpu_names") or {}
    return next(iter(names.values()), None)


def rule_below_link_peak(ctx: _Ctx) -> list[dict]:
    peak_gbps = (ctx.peak or {}).get("peak_gbps")
    if not peak_gbps:
        return []
    out = []
    rows = _largest_per_op(_ok(ctx.summary))
    if rows.empty:
        return []
    rows = rows[(rows["backend"] == "nccl") & (rows["world_size"] > 1)]
    if (rows["timing"] != "host").any():  # host timing adds sync overhead: judge the link by device timings
        rows = rows[rows["timing"] != "host"]
    # One sentence per op: its best device timing at the largest size.
    rows = rows.loc[rows.groupby(["world_size", "op"])["busbw_gbps_median"].idxmax()] if len(rows) else rows
    for _, r in rows.iterrows():
        frac = r["busbw_gbps_median"] / peak_gbps
        if frac >= LOW_PEAK_FRACTION:
            continue
        link = ctx.peak.get("link") or "link"
        path = ""
        links = (ctx.topology or {}).get("links") or []
        if links:
            types = sorted({l["raw"] or l["type"] for l in links})
            path = f" (the topology shows {', '.join(types)} between the GPUs)"
        out.append(_item(
            "warn",
            f"{r['op']} at {human_bytes(r['size_bytes'])} reached {r['busbw_gbps_median']:.1f} GB/s busbw, "
            f"{100 * frac:.0f}% of the {peak_gbps:g} GB/s {link} peak; check the path type between the GPUs "
            f"with `nvidia-smi topo -m`{path}: NV# is NVLink, PIX/PXB/PHB/NODE/SYS go over PCIe.",
            op=r["op"], size_bytes=int(r["size_bytes"]), busbw_gbps=float(r["busbw_gbps_median"]),
            peak_gbps=float(peak_gbps), fraction=round(float(frac), 3), timing=r["timing"]))
    return out


def rule_net_on_one_host(ctx: _Ctx) -> list[dict]:
    nccl = ctx.nccl or {}
    counts = nccl.get("transport_counts") or {}
    net = {t: n for t, n in counts.items() if t.startswith("NET/")}
    if not net:
        return []
    hosts = {p.get("hostname") for p in ctx.placement or [] if p.get("hostname")}
    one_host = nccl.get("nnodes") == 1 or (nccl.get("nnodes") is None and len(hosts) == 1)
    if not one_host:
        return []
    used = ", ".join(f"{t} ({n} connections)" for t, n in sorted(net.items()))
    return [_item(
        "warn",
        f"NCCL connected ranks over {used} although all {nccl.get('nranks') or len(ctx.placement or [])} ranks "
        f"are on one host; P2P (NVLink/PCIe) or SHM was expected. Check NCCL_P2P_DISABLE/NCCL_SHM_DISABLE, "
        f"that containers share IPC (--ipc=host) and that the ranks see each other's GPUs.",
        transports=net, nnodes=nccl.get("nnodes"), hosts=sorted(hosts))]


def rule_shared_gpu(ctx: _Ctx) -> list[dict]:
    by_gpu: dict[tuple, list[int]] = {}
    for p in ctx.placement or []:
        key = (p.get("uuid"),) if p.get("uuid") else (p.get("hostname"), p.get("pci_bus_id") or p.get("device_index"))
        if key == (None, None):
            continue
        by_gpu.setdefault(key, []).append(p.get("rank"))
    out = []
    for key, ranks in by_gpu.items():
        if len(ranks) > 1:
            gpus = len(by_gpu)
            out.append(_item(
                "error",
                f"Ranks {', '.join(map(str, sorted(ranks)))} share one GPU ({key[-1]}), so they serialise on it and "
                f"NCCL may refuse or hang; launch with one process per GPU: torchrun --nproc_per_node={gpus}, "
                f"or set CUDA_VISIBLE_DEVICES per rank.",
                ranks=sorted(ranks), gpu=key[-1]))
    return out


def _nccl_env_settings(ctx: _Ctx) -> dict[str, tuple[str, str]]:
    """NCCL_* variables from every source we have: name -> (value, where it was seen)."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in ((ctx.nccl or {}).get("env") or {}).items():
        found[name] = (str(value), "the NCCL log")
    env = ctx.env or {}
    for bag in (env, env.get("environ") or {}, env.get("nccl_env") or {}):
        if isinstance(bag, dict):
            for name, value in bag.items():
                if isinstance(name, str) and name.startswith("NCCL_"):
                    found.setdefault(name, (str(value), "the environment record"))
    summary = ctx.summary
    if summary is not None and not summary.empty and "nccl_env" in summary:
        for label in summary["nccl_env"].dropna().unique():
            for part in str(label).replace(",", " ").split():
                if part.startswith("NCCL_") and "=" in part:
                    name, value = part.split("=", 1)
                    found.setdefault(name, (value, f"sweep point {label!r}"))
    return found


def rule_transport_disabled(ctx: _Ctx) -> list[dict]:
    out = []
    settings = _nccl_env_settings(ctx)
    for name, what in (("NCCL_P2P_DISABLE", "GPU peer-to-peer (NVLink/PCIe P2P)"),
                       ("NCCL_SHM_DISABLE", "shared-memory transport")):
        value, where = settings.get(name, ("", ""))
        if value.strip().lower() in ("1", "true", "yes"):
            out.append(_item(
                "warn",
                f"{name}={value} ({where}) turns off the {what}, so NCCL falls back to a slower path "
                f"(SHM or the network); unset it unless this run measures that fallback on purpose.",
                variable=name, value=value, source=where))
    return out


def rule_nvls_collnet(ctx: _Ctx) -> list[dict]:
    nccl = ctx.nccl or {}
    nvls, collnet = nccl.get("nvls") or {}, nccl.get("collnet") or {}
    if nvls.get("channels") is None and collnet.get("channels") is None and not nvls.get("enabled_env"):
        return []
    env_note = f", NCCL_NVLS_ENABLE={nvls['enabled_env']}" if nvls.get("enabled_env") is not None else ""
    state = "on" if (nvls.get("channels") or 0) > 0 else "off"
    return [_item(
        "info",
        f"NCCL reported {nvls.get('channels')} NVLS channels and {collnet.get('channels')} CollNet channels{env_note}: "
        f"NVLink SHARP is {state} for this run, which changes the all_reduce busbw to expect.",
        nvls_channels=nvls.get("channels"), collnet_channels=collnet.get("channels"),
        nvls_enable_env=nvls.get("enabled_env"))]


def rule_wrong_results(ctx: _Ctx) -> list[dict]:
    s = ctx.summary
    if s is None or s.empty:
        return []
    # `correct` is a nullable boolean (empty where not checked): NA must count as "not wrong".
    wrong_check = s["correct"].astype("boolean").eq(False).fillna(False) if "correct" in s else False
    bad = s[(s["status"] == "wrong") | wrong_check]
    if bad.empty:
        return []
    cases = [f"{r.op} {human_bytes(r.size_bytes)} ({r.dtype}, {r.backend})" for r in bad.itertuples()]
    shown = ", ".join(cases[:5]) + (f" and {len(cases) - 5} more" if len(cases) > 5 else "")
    return [_item("error",
                  f"{len(cases)} measurements returned wrong results: {shown}; their bandwidths are not valid "
                  f"and the collective or its checker must be fixed first.",
                  count=len(cases), cases=cases)]


def rule_noisy(ctx: _Ctx) -> list[dict]:
    df = _ok(ctx.summary)
    if df.empty:
        return []
    largest = df.groupby(["backend", "world_size", "op"])["size_bytes"].transform("max")
    large = df[(df["size_bytes"] >= LARGE_BYTES) | ((df["size_bytes"] == largest) & (df["size_bytes"] > 0))]
    noisy = large[large["time_us_cv"] > CV_NOISY]
    if noisy.empty:
        return []
    worst = noisy.loc[noisy["time_us_cv"].idxmax()]
    return [_item(
        "warn",
        f"{len(noisy)} large-message measurements vary by more than {100 * CV_NOISY:.0f}% between trials; the worst, "
        f"{worst['op']} at {human_bytes(worst['size_bytes'])} ({worst['timing']} timing), has a coefficient of variation "
        f"of {100 * worst['time_us_cv']:.0f}% (p5 {human_time_us(worst['time_us_p5'])}, p95 {human_time_us(worst['time_us_p95'])}): "
        f"other jobs, clock changes or too few iterations are likely; rerun on an idle machine with more trials.",
        count=int(len(noisy)), op=worst["op"], size_bytes=int(worst["size_bytes"]), cv=float(worst["time_us_cv"]))]


def rule_host_overhead(ctx: _Ctx) -> list[dict]:
    df = _ok(ctx.summary)
    if df.empty or not {"host", "events"} <= set(df["timing"]):
        return []
    key = [k for k in _KEY if k in df]  # nodes / traffic: absent from summaries made before them
    host = df[df["timing"] == "host"].set_index(key)["time_us_median"]
    events = df[df["timing"] == "events"].set_index(key)["time_us_median"]
    both = pd.concat({"host": host, "events": events}, axis=1, join="inner").reset_index()
    both = both[(both["size_bytes"] <= SMALL_BYTES) & (both["host"] > HOST_OVER_EVENTS * both["events"])
                & (both["host"] - both["events"] > HOST_MIN_GAP_US)]
    if both.empty:
        return []
    r = both.loc[(both["host"] / both["events"]).idxmax()]
    ev = df[df["timing"] == "events"].set_index(key)
    # a host-bound events figure already is the launch cost (distbench.comm.contract.host_bound)
    ev_bound = "host_bound" in ev and to_bool(ev.loc[tuple(r[k] for k in key), "host_bound"]) is True
    why = ("the events figure is itself host-bound (torch's per-call host cost, not link latency), so the "
           "difference is the synchronisation after every op; CUDA graphs leave both out" if ev_bound else
           "the difference is kernel launch and Python/framework dispatch overhead, which events (and CUDA graphs) "
           "leave out")
    return [_item(
        "info",
        f"At small sizes host timing is much slower than CUDA events: {r['op']} at {human_bytes(r['size_bytes'])} "
        f"takes {human_time_us(r['host'])} by the host clock but {human_time_us(r['events'])} "
        f"{'with CUDA events' if ev_bound else 'on the GPU'}; {why}.",
        op=r["op"], size_bytes=int(r["size_bytes"]), host_us=float(r["host"]), events_us=float(r["events"]),
        cases=int(len(both)))]


MIXING_OFF = "NCCL_GRAPH_MIXING_SUPPORT=0"  # the nccl_env label of the variant that measures NCCL's own graph latency
MIXING_EVIDENCE = "benchmarks/results/nccl-layouts-h200x2-2026-11-26"


def rule_graph_mixing(ctx: _Ctx) -> list[dict]:
    """CUDA-graph timing at small sizes under NCCL's default graph mixing: with it on, NCCL puts an event
    record after every captured op (and a wait before the first), and torch's c10d, which captures each op
    on its own NCCL stream joined back to the capture stream, pays about 5 us per op for it on 2x H200
    (10.7 against 5.0 us at 8 B); raw NCCL and nccl-tests pay under 1 us (see MIXING_EVIDENCE). Measured
    side by side where the run has the NCCL_GRAPH_MIXING_SUPPORT=0 variant; otherwise a tip to add it."""
    df = _ok(ctx.summary)
    if df.empty or "nccl_env" not in df:
        return []
    g = df[(df["backend"] == "nccl") & (df["timing"] == "graph") & (df["size_bytes"] <= SMALL_BYTES)
           & df["time_us_median"].notna()]
    default = g[g["nccl_env"] == "default"]
    if default.empty:
        return []
    key = [k for k in _KEY if k in g and k != "nccl_env"]
    off = g[g["nccl_env"] == MIXING_OFF]
    if not off.empty:
        both = pd.concat({"on": default.set_index(key)["time_us_median"], "off": off.set_index(key)["time_us_median"]},
                         axis=1, join="inner").reset_index()
        if both.empty:
            return []
        r = both.loc[both["size_bytes"].idxmin()]
        return [_item(
            "info",
            f"CUDA-graph {r['op']} at {human_bytes(r['size_bytes'])}: {human_time_us(r['on'])} per op with NCCL's graph mixing "
            f"on (the default) and {human_time_us(r['off'])} with {MIXING_OFF}; the {human_time_us(r['on'] - r['off'])} difference is "
            f"the event NCCL records after every captured op so that graph and eager use of a communicator stay "
            f"ordered, which torch's c10d capture pays per op (nccl-tests and raw NCCL pay under 1 µs of it: "
            f"{MIXING_EVIDENCE}). Training that replays graphs with the default pays it too.",
            op=r["op"], size_bytes=int(r["size_bytes"]), mixing_on_us=float(r["on"]), mixing_off_us=float(r["off"]))]
    r = default.loc[default["size_bytes"].idxmin()]
    return [_item(
        "info",
        f"CUDA-graph {r['op']} at {human_bytes(r['size_bytes'])} took {human_time_us(r['time_us_median'])} per op with NCCL's "
        f"graph mixing on (the default); torch's c10d capture pays about 5 µs per op for it on 2x H200, nccl-tests and "
        f"raw NCCL under 1 µs ({MIXING_EVIDENCE}). To measure NCCL's own small-message latency beside it, add "
        f"{{NCCL_GRAPH_MIXING_SUPPORT: 0}} to comm.nccl_env.",
        op=r["op"], size_bytes=int(r["size_bytes"]), mixing_on_us=float(r["time_us_median"]))]


def rule_below_expected(ctx: _Ctx) -> list[dict]:
    name = _gpu_name(ctx)
    if not name:
        return []
    nvls_channels = ((ctx.nccl or {}).get("nvls") or {}).get("channels")
    nvls = None if nvls_channels is None else nvls_channels > 0
    out = []
    rows = _largest_per_op(_ok(ctx.summary))
    if rows.empty:
        return []
    for _, r in rows[rows["backend"] == "nccl"].iterrows():
        exp = expected_for(name, int(r["world_size"]), r["op"], int(r["size_bytes"]), nvls=nvls)
        if not exp or r["busbw_gbps_median"] >= FAR_BELOW_EXPECTED * exp["expected_busbw_gbps_low"]:
            continue
        out.append(_item(
            "warn",
            f"{r['op']} on {int(r['world_size'])}x {name} at {human_bytes(r['size_bytes'])} reached "
            f"{r['busbw_gbps_median']:.1f} GB/s busbw, far below {reference_text(exp)}.",
            op=r["op"], size_bytes=int(r["size_bytes"]), busbw_gbps=float(r["busbw_gbps_median"]),
            expected_low_gbps=exp["expected_busbw_gbps_low"], expected_high_gbps=exp["expected_busbw_gbps_high"],
            source=exp["source"]))
    return out


RULES = (rule_wrong_results, rule_shared_gpu, rule_net_on_one_host, rule_transport_disabled, rule_below_link_peak,
         rule_below_expected, rule_noisy, rule_host_overhead, rule_graph_mixing, rule_nvls_collnet)
_SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}


def advise(summary: pd.DataFrame, env: dict | None = None, topology: dict | None = None, nccl: dict | None = None,
           placement: list[dict] | None = None, peak: dict | None = None) -> list[dict]:
    """All advice items, errors first."""
    ctx = _Ctx(summary if summary is not None else pd.DataFrame(), env, topology, nccl, placement, peak)
    items = [item for rule in RULES for item in rule(ctx)]
    return sorted(items, key=lambda i: _SEVERITY_ORDER[i["severity"]])


def percent_of_peak(summary: pd.DataFrame, peak_gbps: float | None) -> pd.DataFrame:
    """A copy of `summary` with pct_of_link_peak = 100 * busbw_gbps_median / peak_gbps (NaN without a peak)."""
    out = summary.copy()
    if peak_gbps and not math.isnan(peak_gbps):
        out["pct_of_link_peak"] = 100.0 * out["busbw_gbps_median"] / float(peak_gbps)
    else:
        out["pct_of_link_peak"] = float("nan")
    return out
