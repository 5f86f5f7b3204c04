"""Communication's headlines for the report's Verdict: per backend, at its largest judged world size
(distbench.core.judged.judged_world_size: the largest whose ranks each have a core; the quick answer
judges the same one),
all_reduce at its largest size measured ok (primary timing), against the published busbw figure for
this GPU, world size and op (distbench.core.references.expected_for: healthy from
HEALTHY_OF_PUBLISHED of its low end), else the link peak (healthy from
distbench.comm.analysis.advice.LOW_PEAK_FRACTION of it). With more Gloo ranks on a host than it has cores
(env.json; distbench.core.section.oversubscribed) the run is a smoke test: "measured"; so is a
host-bound point (only small sizes ran, and the GPU waited for the host: distbench.comm.contract.host_bound).
Where events timing is host-bound at a point that graph timing also measured, the graph figure stands in
for it (gpu_side_rows: here and in the Communication tables), its graph-mixing setting named
(graph_mixing) and torch's per-call host cost beside it, so it compares with nccl-tests' figure."""

from __future__ import annotations

import pandas as pd

from distbench.comm.analysis.findings import HOST_BOUND, HOST_COST, is_host_bound, normalise_summary, primary_rows
from distbench.core.references import expected_for, missing_reference, reference_text
from distbench.core.choices import backend_name
# healthy against a reference row or the link peak: the node gate holds its runs to the same thresholds
from distbench.core.references import HEALTHY_OF_PUBLISHED, LOW_PEAK_FRACTION
from distbench.core.section import Headline, judged_world_size, oversubscribed, ranks_per_host
from distbench.core.units import human_bytes, human_time_us, sig3
from distbench.core.units import pct as _pct

GRAPH_MIXING_VAR = "NCCL_GRAPH_MIXING_SUPPORT"
HOST_COST_LABEL = "torch host cost"  # beside a graph figure: the events time per op there (HOST_COST)
# the columns that name one point of a sweep: an events row and its graph twin share them
_POINT = ("backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "inplace", "requested_bytes",
          "size_bytes")


def _label_env(label) -> dict:
    """An nccl_env label ('default', 'NCCL_ALGO=Ring+NCCL_PROTO=Simple') as the variables it set."""
    label = "" if label is None or pd.isna(label) else str(label)
    return dict(part.split("=", 1) for part in label.split("+") if "=" in part)


def graph_mixing(nccl_env_label=None, job_env: dict | None = None, launcher_env: dict | None = None) -> str:
    """How a graph figure was taken: NCCL's graph mixing (GRAPH_MIXING_VAR) on or off, and where that
    was set: the point's comm.nccl_env, else the config's job_env, else the launcher's environment
    (env.json's job_env), else NCCL's default (on). Under torch's c10d capture it costs about 5 µs per
    op (distbench.comm.analysis.advice.rule_graph_mixing)."""
    for where, env in (("comm.nccl_env", _label_env(nccl_env_label)), ("job_env", job_env or {}),
                       ("the launcher's environment", launcher_env or {})):
        if GRAPH_MIXING_VAR in env:
            value = str(env[GRAPH_MIXING_VAR]).strip()
            return f"graph mixing {'off' if value == '0' else 'on'}: {GRAPH_MIXING_VAR}={value} in {where}"
    return f"graph mixing on: {GRAPH_MIXING_VAR} unset, NCCL's default"


def gpu_side_rows(summary: pd.DataFrame, primary: pd.DataFrame) -> pd.DataFrame:
    """`primary` (primary_rows of `summary`) with each host-bound events row replaced by the graph row
    of the same point where `summary` has one that ran ok: the GPU's side of that point, where events
    timing measured torch's per-call host cost (25 µs for 8 B all_reduce on 2x H200, where
    graph timing gives 11.3 µs and nccl-tests 6.8). The rows gain `gpu_side` (True where replaced),
    `host_cost_us` (the events time per op there: torch's per-call host cost) and
    `host_cost_issue_us` (the host's issue time per op under events)."""
    out = primary.copy().reset_index(drop=True)
    out["gpu_side"] = False
    out["host_cost_us"] = float("nan")
    out["host_cost_issue_us"] = float("nan")
    if out.empty or "host_bound" not in out or "timing" not in summary:
        return out
    graph = summary[(summary["timing"] == "graph") & (summary["status"] == "ok")]
    bound = out.index[(out["timing"] == "events") & out["host_bound"].astype(bool)]
    if graph.empty or not len(bound):
        return out
    keys = [k for k in _POINT if k in out and k in graph]
    twins = {tuple(r[k] for k in keys): r for _, r in graph.iterrows()}
    shared = [c for c in graph.columns if c in out.columns]
    for i in bound:
        twin = twins.get(tuple(out.at[i, k] for k in keys))
        if twin is None:
            continue
        events_us, events_issue = out.at[i, "time_us_median"], out.at[i, "host_issue_us_median"]
        for c in shared:
            out.at[i, c] = twin[c]
        out.at[i, "gpu_side"], out.at[i, "host_cost_us"], out.at[i, "host_cost_issue_us"] = True, events_us, events_issue
    return out


# On a node with one GPU there is no collective between GPUs to measure: the Verdict says so in this row
# instead of heading its communication line with Gloo's figure (CPU processes, not the GPU), which stays
# in the Communication section, labelled (docs/report.md, "Node shapes").
ONE_GPU_TEXT = "no collective between GPUs to measure: this node has one GPU"
ONE_GPU_REASON = ("a collective between GPUs needs two or more; the Gloo figures in the Communication section are "
                  "CPU processes over shared memory, not this GPU, so the Verdict does not judge them")
GLOO_ON_GPU_NODE = ("These are Gloo figures: CPU processes over shared memory or TCP, not this node's GPU{s}, "
                    "which {verb} not measured here; they say how fast the host moves data between processes")


def one_gpu_headline() -> Headline:
    """The one-GPU node's communication row: nothing between GPUs to measure; after what that GPU can
    answer (its MFU, its memory: their sections' `lead`)."""
    return Headline("communication", ONE_GPU_TEXT, "measured", ONE_GPU_REASON, lead=-1)


HEADLINE_OP = "all_reduce"  # the collective of data-parallel training; another op when it was not run


def comm_headlines(summary: pd.DataFrame, gpu_name: str | None = None, peak: dict | None = None,
                   nvls: bool | None = None, env: dict | None = None, job_env: dict | None = None,
                   gpus: int | None = None) -> list[Headline]:
    """One headline per backend (`gpus`: the node's, distbench.core.judged.node_gpus; on one GPU with no
    NCCL row, one_gpu_headline instead of Gloo's): its largest judged world size, all_reduce (or the first op measured) at
    the largest size that ran ok, against the published figure or the link peak (`env`: env.json,
    for the host's cores and the launcher's NCCL variables). Where events timing is host-bound there and
    graph timing measured the point, the graph figure is the headline (gpu_side_rows), its graph-mixing
    setting named (`job_env`: the config's) and torch's per-call host cost beside it, not judged: a
    size that short is latency, not bandwidth."""
    if summary is not None and len(summary) and "world_size" in summary:
        # one rank moves nothing between processes (busbw is 0 by definition): no headline is taken there
        summary = summary[pd.to_numeric(summary["world_size"], errors="coerce") >= 2]
    ran_nccl = summary is not None and len(summary) and (summary["backend"].astype(str) == "nccl").any()
    if gpus == 1 and not ran_nccl:
        return [one_gpu_headline()]
    if summary is None or summary.empty:
        return []
    s = normalise_summary(summary)
    out = []
    for backend, b in s.groupby("backend", sort=True):
        wrong = b[b["status"] == "wrong"]
        p = gpu_side_rows(b, primary_rows(b))
        p = p[p["busbw_gbps_median"].notna()] if len(p) else p
        if p.empty:
            failed = b[b["status"].isin(["failed", "hung", "timeout", "wrong", "oom"])]
            out.append(Headline("communication", f"{backend_name(backend)}: no collective measured ok",
                                "failing" if len(failed) else "measured",
                                f"{len(failed)} measurement(s) failed" if len(failed) else "nothing ran"))
            continue
        # the largest world size whose ranks each have a core (the quick answer's too: one rule)
        ws = judged_world_size(p["world_size"], lambda w: oversubscribed(ranks_per_host(p, w, "nodes"), str(backend), env or {}))
        at = p[p["world_size"] == ws]
        op = HEADLINE_OP if (at["op"] == HEADLINE_OP).any() else at["op"].iloc[0]
        r = at[at["op"] == op].sort_values("size_bytes").iloc[-1]
        bw, size = float(r["busbw_gbps_median"]), int(r["size_bytes"])
        nodes = int(r["nodes"]) if "nodes" in r and pd.notna(r["nodes"]) else 1
        where = f"{ws} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
        text = f"{backend_name(backend)} {op} {human_bytes(size)}: {sig3(bw)} GB/s busbw at {where}"
        gpu_side = bool(r.get("gpu_side", False))
        if gpu_side:  # events timing there was torch's per-call host cost: the GPU's side, that cost beside it
            text = (f"{backend_name(backend)} {op} {human_bytes(size)}: {human_time_us(r['time_us_median'])} per op, "
                    f"{sig3(bw)} GB/s busbw at {where} (graph timing, "
                    f"{graph_mixing(r['nccl_env'], job_env, (env or {}).get('job_env'))}; {HOST_COST_LABEL}: "
                    f"{human_time_us(r['host_cost_us'])} per op under events timing)")
        peak_gbps = float(peak["peak_gbps"]) if backend == "nccl" and peak and peak.get("peak_gbps") else None
        if peak_gbps:
            text += f", {_pct(bw / peak_gbps)} of the {sig3(peak_gbps)} GB/s {peak.get('link') or 'link'} peak"
        exp = expected_for(gpu_name, ws, op, size, nvls=nvls) if backend == "nccl" and nodes == 1 else None
        crowded = oversubscribed(ranks_per_host(p, ws, "nodes"), str(backend), env or {})
        if len(wrong):
            verdict, reason = "failing", f"{len(wrong)} measurement(s) returned wrong results"
        elif gpu_side and not is_host_bound(r):  # only small sizes ran: their GPU time is latency
            verdict, reason = "measured", (f"{HOST_BOUND} events timing at {human_bytes(size)}: {HOST_COST} (the host "
                                           f"took {human_time_us(r['host_cost_issue_us'])} to issue each op), so the "
                                           "GPU's side is shown (graph timing); a size this short measures latency, "
                                           "not the link's bandwidth, so it is not judged")
        elif is_host_bound(r):  # only small sizes ran: the figure is the host's, not the link's
            verdict, reason = "measured", (f"{HOST_BOUND}: at {human_bytes(size)} the {r['timing']} time per op is "
                                           f"{HOST_COST} (the host took {sig3(r['host_issue_us_median'])} µs to "
                                           "issue each op), so it is not judged")
        elif crowded:
            verdict, reason = "measured", (f"smoke test: {crowded}: the ranks time-share the host, so this "
                                           "bandwidth measures that contention and is not judged")
        elif exp:
            low = exp["expected_busbw_gbps_low"]
            ok = bw >= HEALTHY_OF_PUBLISHED * low
            verdict = "healthy" if ok else "below expected"
            reason = f"{'within' if bw >= low else ('near' if ok else 'below')} {reference_text(exp)}"
        elif peak_gbps:
            ok = bw >= LOW_PEAK_FRACTION * peak_gbps
            verdict = "healthy" if ok else "below expected"
            reason = (f"{'at least' if ok else 'under'} {_pct(LOW_PEAK_FRACTION)} of the link peak; "
                      + missing_reference(gpu_name, ws, op, size, nvls))
        else:
            verdict, reason = "measured", ("no reference for Gloo (CPU processes over shared memory or TCP)"
                                           if backend == "gloo" else "no link peak for this GPU, and "
                                           + missing_reference(gpu_name, ws, op, size, nvls))
        out.append(Headline("communication", text, verdict, reason))
    return out
