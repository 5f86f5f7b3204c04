"""The traces' report section (config profile): per profiled job, where its traces are, the overlap
and the temporal breakdown (idle / compute / non-compute GPU time) they show (distbench.traces.overlap),
beside the training family's step-time overlap for the same job. Fragments: templates/traces.*.j2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.section import ReportInputs, Section, pct_cell, table

TEMPLATES = Path(__file__).parent / "templates"


def _read_traces(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"job": "string", "trace": "string", "note": "string", "mode": "string"})


def _breakdown_cell(traced: pd.DataFrame) -> str | None:
    """"idle / compute / non-compute" percentages of the GPU span, each the median over the ranks;
    a CPU-only trace has no device timeline to break down, so it says so rather than show a number."""
    if traced.empty:
        return None
    if (traced["source"] == "cpu_ops").all():
        return "not available on CPU"
    if "idle_pct" not in traced.columns:  # a table written before the breakdown existed
        return None
    parts = [traced[c].dropna() for c in ("idle_pct", "compute_time_pct", "non_compute_time_pct")]
    if any(p.empty for p in parts):
        return None
    return " / ".join(pct_cell(p.median() / 100) for p in parts)


def build(inputs: ReportInputs) -> dict | None:
    """Traces on request (config profile): per profiled job, where its traces are and the overlap
    they show (HTA's definition, distbench.traces.overlap), beside the training family's own
    step-time overlap for the same job."""
    t = inputs.table("traces_csv", _read_traces)
    if t is None or t.empty:
        return None
    step_overlap = {}
    s = inputs.table("training_summary")
    if s is not None:
        step_overlap = {f"{r['backend']}/{r['model']}/ws{int(r['world_size'])}/{r['config']}": r["overlap_fraction"]
                        for _, r in s.iterrows()} if {"model", "config"} <= set(s.columns) else {}
    headers = ["family", "job", "mode", "ranks traced", "overlap in the trace (median over ranks)",
               "overlap by step times", "GPU time: idle / compute / non-compute (median over ranks)", "traces"]
    rows = []
    for (family, job), g in t.groupby(["family", "job"], sort=True):
        traced = g[g["trace"].fillna("") != ""]
        ov = traced["overlap_fraction"].dropna()
        files = [f"../{p}" for p in traced["trace"]]
        rows.append([family, job, g["mode"].iloc[0], len(traced), pct_cell(ov.median()) if len(ov) else None,
                     pct_cell(step_overlap.get(job)) if family == "training" and job in step_overlap else None,
                     _breakdown_cell(traced),
                     " ".join(files) if files else (g["note"].iloc[0] or None)])
    return {"table": table(headers, rows),
            "note": ("Each trace is a short extra pass after the job's timed passes (never inside them); open it at "
                     "ui.perfetto.dev. Overlap in the trace = time computing while communicating / time communicating "
                     "(Holistic Trace Analysis' definition; GPU: NCCL kernels, ncclDevKernel_* and older names, "
                     "against the other kernels; CPU: Gloo's gloo:* collectives against aten:: ops). Overlap by step "
                     "times = 1 - exposed communication / the gradient all-reduce alone (the training table). GPU time "
                     "(Holistic Trace Analysis' temporal breakdown) splits the span from the first GPU kernel, copy or "
                     "set to the last into idle (none running), compute (a computation kernel running) and "
                     "non-compute (only NCCL or memory kernels running); a CPU trace has no such timeline.")}


TRACES = Section("traces", "Traces", TEMPLATES, build)
