"""Communication's headlines for the report's Verdict: per backend, at its largest judged world size
(distbench.core.judged.judged_world_size: the largest whose ranks each have a core; the quick answer
judges the same one),
all_reduce at its largest size measured ok (primary timing), against the published busbw figure for
this GPU, world size and op (distbench.comm.analysis.peak.expected_for: healthy from
HEALTHY_OF_PUBLISHED of its low end), else the link peak (healthy from
distbench.comm.analysis.advice.LOW_PEAK_FRACTION of it). With more Gloo ranks on a host than it has cores
(env.json; distbench.core.section.oversubscribed) the run is a smoke test: "measured"; so is a
host-bound point (only small sizes ran, and the GPU waited for the host: distbench.comm.contract.host_bound)."""

from __future__ import annotations

import pandas as pd

from distbench.comm.analysis.advice import LOW_PEAK_FRACTION
from distbench.comm.analysis.findings import (
    HOST_BOUND, HOST_COST, is_host_bound, normalise_summary, primary_rows, ranks_per_host,
)
from distbench.comm.analysis.peak import expected_for, reference_text
from distbench.core.choices import backend_name
from distbench.core.section import Headline, judged_world_size, oversubscribed
from distbench.core.units import human_bytes, sig3
from distbench.core.units import pct as _pct

HEALTHY_OF_PUBLISHED = 0.90  # of the published range's low end: run-to-run and machine-to-machine spread
HEADLINE_OP = "all_reduce"  # the collective of data-parallel training; another op when it was not run


def comm_headlines(summary: pd.DataFrame, gpu_name: str | None = None, peak: dict | None = None,
                   nvls: bool | None = None, env: dict | None = None) -> list[Headline]:
    """One headline per backend: its largest judged world size, all_reduce (or the first op measured) at
    the largest size that ran ok, against the published figure or the link peak (`env`: env.json,
    for the host's cores)."""
    if summary is None or summary.empty:
        return []
    s = normalise_summary(summary)
    out = []
    for backend, b in s.groupby("backend", sort=True):
        wrong = b[b["status"] == "wrong"]
        p = primary_rows(b)
        p = p[p["busbw_gbps_median"].notna()] if len(p) else p
        if p.empty:
            failed = b[b["status"].isin(["failed", "hung", "timeout", "wrong", "oom"])]
            out.append(Headline("communication", f"{backend_name(backend)}: no collective measured ok",
                                "failing" if len(failed) else "measured",
                                f"{len(failed)} measurement(s) failed" if len(failed) else "nothing ran"))
            continue
        # the largest world size whose ranks each have a core (the quick answer's too: one rule)
        ws = judged_world_size(p["world_size"], lambda w: oversubscribed(ranks_per_host(p, w), str(backend), env or {}))
        at = p[p["world_size"] == ws]
        op = HEADLINE_OP if (at["op"] == HEADLINE_OP).any() else at["op"].iloc[0]
        r = at[at["op"] == op].sort_values("size_bytes").iloc[-1]
        bw, size = float(r["busbw_gbps_median"]), int(r["size_bytes"])
        nodes = int(r["nodes"]) if "nodes" in r and pd.notna(r["nodes"]) else 1
        where = f"{ws} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
        text = f"{backend_name(backend)} {op} {human_bytes(size)}: {sig3(bw)} GB/s busbw at {where}"
        peak_gbps = float(peak["peak_gbps"]) if backend == "nccl" and peak and peak.get("peak_gbps") else None
        if peak_gbps:
            text += f", {_pct(bw / peak_gbps)} of the {sig3(peak_gbps)} GB/s {peak.get('link') or 'link'} peak"
        exp = expected_for(gpu_name, ws, op, size, nvls=nvls) if backend == "nccl" and nodes == 1 else None
        crowded = oversubscribed(ranks_per_host(p, ws), str(backend), env or {})
        if len(wrong):
            verdict, reason = "failing", f"{len(wrong)} measurement(s) returned wrong results"
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
            reason = (f"{'at least' if ok else 'under'} {_pct(LOW_PEAK_FRACTION)} of the link peak; no reference figure "
                      "(published, or measured by us) for this GPU, world size and size")
        else:
            verdict, reason = "measured", ("no reference for Gloo (CPU processes over shared memory or TCP)"
                                           if backend == "gloo" else "no link peak or reference figure for this GPU")
        out.append(Headline("communication", text, verdict, reason))
    return out
