"""The report's first section: a few headline numbers, each with its unit, its reference and a
one-word verdict with the reason, read from the aggregated tables (no harness imported).

Verdicts:
- failing: results were wrong, or the measurement failed;
- below expected: under the reference that applies (see below);
- healthy: at or above it;
- measured: there is nothing to hold it against (Gloo on CPU, a GPU without a published figure or
  link peak, memory figures).

Communication (per backend, at its largest world size, all_reduce at its largest size measured
ok, primary timing): the reference is the published busbw figure for this GPU, world size and op
(distbench.comm.analysis.peak.expected_for: healthy from HEALTHY_OF_PUBLISHED of its low end), else the link peak
(healthy from distbench.comm.analysis.advice.LOW_PEAK_FRACTION of it). Training (per model, plain DDP at its
largest world size): scaling efficiency against plain DDP on one GPU, healthy from
HEALTHY_EFFICIENCY; the reason names the bottleneck (distbench.training.analysis.summary.verdict). Memory: the
largest batch that fits (the search), or the largest measured.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd

from distbench.comm.analysis.advice import LOW_PEAK_FRACTION
from distbench.comm.analysis.findings import normalise_summary, primary_rows
from distbench.core.choices import backend_name
from distbench.comm.analysis.peak import expected_for
from distbench.core.units import human_bytes, human_time_us, sig3
from distbench.core.units import pct as _pct

HEALTHY_OF_PUBLISHED = 0.90  # of the published range's low end: run-to-run and machine-to-machine spread
HEALTHY_EFFICIENCY = 0.90  # scaling efficiency vs one GPU at the largest world size
# Above this, the 1-GPU run was slower per GPU than the multi-GPU one: the baseline, not the scaling, is
# what the number says something about, so it is not called healthy.
SUPERLINEAR_EFFICIENCY = 1.10
VERDICTS = ("failing", "below expected", "healthy", "measured")  # worst first
HEADLINE_OP = "all_reduce"  # the collective of data-parallel training; another op when it was not run


@dataclass(frozen=True)
class Headline:
    area: str  # communication, training, memory
    headline: str  # the number(s), with units
    verdict: str  # one of VERDICTS
    reason: str


def comm_headlines(summary: pd.DataFrame, gpu_name: str | None = None, peak: dict | None = None,
                   nvls: bool | None = None) -> list[Headline]:
    """One headline per backend: its largest world size, all_reduce (or the first op measured) at
    the largest size that ran ok, against the published figure or the link peak."""
    if summary is None or summary.empty:
        return []
    s = normalise_summary(summary)
    out = []
    for backend, b in s.groupby("backend", sort=True):
        wrong = b[b["status"] == "wrong"]
        p = primary_rows(b)
        p = p[p["busbw_gbps_median"].notna()] if len(p) else p
        if p.empty:
            failed = b[b["status"].isin(["failed", "wrong", "oom"])]
            out.append(Headline("communication", f"{backend_name(backend)}: no collective measured ok",
                                "failing" if len(failed) else "measured",
                                f"{len(failed)} measurement(s) failed" if len(failed) else "nothing ran"))
            continue
        ws = int(p["world_size"].max())
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
        if len(wrong):
            verdict, reason = "failing", f"{len(wrong)} measurement(s) returned wrong results"
        elif exp:
            low, high = exp["expected_busbw_gbps_low"], exp["expected_busbw_gbps_high"]
            ok = bw >= HEALTHY_OF_PUBLISHED * low
            verdict = "healthy" if ok else "below expected"
            reason = (f"{'within' if bw >= low else ('near' if ok else 'below')} the published {low:g}-{high:g} GB/s "
                      f"for {ws}x {exp['gpu']} ({exp['source']})")
        elif peak_gbps:
            ok = bw >= LOW_PEAK_FRACTION * peak_gbps
            verdict = "healthy" if ok else "below expected"
            reason = (f"{'at least' if ok else 'under'} {_pct(LOW_PEAK_FRACTION)} of the link peak; no published figure "
                      "for this GPU and world size")
        else:
            verdict, reason = "measured", ("no reference for Gloo (CPU processes over shared memory or TCP)"
                                           if backend == "gloo" else "no link peak or published figure for this GPU")
        out.append(Headline("communication", text, verdict, reason))
    return out


def training_headlines(training: pd.DataFrame | None) -> list[Headline]:
    """Per model: plain DDP (else its first configuration) at the largest world size."""
    from distbench.training.analysis.summary import verdict as bottleneck

    if training is None or training.empty:
        return []
    out = []
    t = training if "model" in training else training.assign(model="mlp")
    for model, g in t.groupby("model", sort=True):
        multi = g[g["world_size"] > 1]
        if multi.empty:
            continue
        ws = int(multi["world_size"].max())
        at = multi[multi["world_size"] == ws]
        plain = at[at["config"] == "plain"]
        r = (plain if len(plain) else at).iloc[0]
        label = f"{model} ({r.get('strategy', 'ddp')}, {r['config']})"
        if str(r["status"]) != "ok":
            out.append(Headline("training", f"{label} at {ws} ranks: {r['status']}", "failing",
                                str(r.get("message") or "the job did not complete")))
            continue
        eff = float(r["efficiency_vs_plain_1gpu"]) if pd.notna(r.get("efficiency_vs_plain_1gpu")) else math.nan
        step_us = float(r["step_time_ms_median"]) * 1e3
        exposed_us = float(r["exposed_comm_ms"]) * 1e3 if pd.notna(r.get("exposed_comm_ms")) else math.nan
        text = f"{label} at {ws} ranks: "
        text += f"{_pct(eff)} scaling efficiency vs 1 GPU" if not math.isnan(eff) else "no 1-GPU baseline"
        if not math.isnan(exposed_us):
            text += f", {human_time_us(max(exposed_us, 0.0))} exposed communication of a {human_time_us(step_us)} step"
        kind, _ = bottleneck(r)
        if math.isnan(eff):
            verdict, reason = "measured", f"{kind}; no 1-GPU run to compare with"
        elif eff > SUPERLINEAR_EFFICIENCY:
            verdict, reason = "measured", ("above linear scaling: each GPU ran faster than the 1-GPU baseline did, "
                                           "so the baseline is suspect (compare its step time and MFU)")
        elif eff >= HEALTHY_EFFICIENCY:
            verdict, reason = "healthy", f"at least {_pct(HEALTHY_EFFICIENCY)} of linear scaling ({kind})"
        else:
            share = f"; {_pct(max(exposed_us, 0.0) / step_us)} of each step is exposed communication" \
                if not math.isnan(exposed_us) else ""
            verdict, reason = "below expected", f"under {_pct(HEALTHY_EFFICIENCY)} of linear scaling{share} ({kind})"
        out.append(Headline("training", text, verdict, reason))
    return out


def memory_headlines(memory: pd.DataFrame | None) -> list[Headline]:
    """Per model and configuration at one rank (else the smallest world size): the largest batch."""
    if memory is None or memory.empty:
        return []
    out = []
    for (model, config), g in memory.groupby(["model", "config"], sort=True):
        r = g.sort_values("world_size").iloc[0]
        who = f"{model} ({config}) at {int(r['world_size'])} rank(s)"
        if str(r["status"]) not in ("ok", "oom"):
            out.append(Headline("memory", f"{who}: {r['status']}", "failing", str(r.get("message") or "")))
            continue
        if pd.notna(r.get("largest_batch_fits")):
            text = f"{who}: the largest batch that fits is {int(r['largest_batch_fits'])} per rank"
            reason = "searched on the GPU (doubling, then bisection)"
        elif pd.notna(r.get("largest_measured_batch")):
            text = f"{who}: batches up to {int(r['largest_measured_batch'])} per rank measured"
            reason = "no search here (it runs for DDP on a GPU with memory.search on)"
        else:
            continue
        if pd.notna(r.get("peak_allocated_bytes")):
            text += f", peak {human_bytes(int(r['peak_allocated_bytes']))} allocated"
        out.append(Headline("memory", text, "measured", reason))
    return out


def headlines(summary: pd.DataFrame, training: pd.DataFrame | None = None, memory: pd.DataFrame | None = None,
              gpu_name: str | None = None, peak: dict | None = None, nvls: bool | None = None) -> list[dict]:
    """Every headline, failing ones first, as plain dicts for the templates."""
    rows = comm_headlines(summary, gpu_name, peak, nvls) + training_headlines(training) + memory_headlines(memory)
    order = {v: i for i, v in enumerate(VERDICTS)}
    return [asdict(h) for h in sorted(rows, key=lambda h: order[h.verdict])]
