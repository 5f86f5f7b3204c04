"""training.inspect in the report: what each inspected job recorded inside its step and what
it could not, its buckets beside the comm family's standalone figures (the sentences of
training_instep.csv), and its step in four parts with the headline naming the largest cost
(training_split.csv, distbench.training.analysis.instep_summary). The training section (section.py)
shows it under "Inside the step"; its Verdict headline takes the largest cost from here (`verdict_clause`)."""

from __future__ import annotations

import pandas as pd

from distbench.core.section import pct_cell, table, time_cell
from distbench.core.units import sig3
from distbench.training.analysis.instep import FAR_BELOW_RATIO, PARTS

# what each source of training_instep.csv records, in words
SOURCES = {
    "inspector": "NCCL's Inspector plugin: every collective of the timed steps, kernel-timed, with its size and bus "
                 "bandwidth",
    "profiler": "the torch profiler's NCCL kernels of the traced steps after the timed ones (Inspector did not load): "
                "each collective's size, time and bus bandwidth",
    "gloo": "Gloo's collectives on CPU, from the profiler: each one's op and time",
    "none": "no collective",
}


def _ms(x) -> str | None:
    return None if x is None or pd.isna(x) else time_cell(float(x) * 1e3)


def job_key(row) -> str:
    """A summary row's job as training_split.csv names it: backend/model/ws<N>/config."""
    return f"{row['backend']}/{row['model']}/ws{int(row['world_size'])}/{row['config']}"


def _not_recorded(r: dict) -> list[str]:
    """What this job's record lacks, each in words (the note of the tables, the split, the MFU)."""
    note = r.get("note")
    out = [n.strip() for n in ("" if note is None or pd.isna(note) else str(note)).split(";") if n.strip()]
    if pd.isna(r.get("mfu_achievable")):
        out.append("no achievable matmul peak (training.matmul_sweep: off, or no GPU to sweep)")
    if pd.isna(r.get("mfu_spec")) and pd.notna(r.get("tflops_per_device")):
        out.append("no spec-sheet MFU (the device has no peak in distbench/training/analysis/mfu.py)")
    return out


def _rest(r: dict) -> str | None:
    named = [(label, r.get(f"rest_{k}_ms")) for k, label in (("optimizer", "optimizer"),
                                                             ("comm_bookkeeping", "comm bookkeeping"),
                                                             ("memory_copies", "memory copies"),
                                                             ("host_gaps", "host gaps"), ("unexplained", "unexplained"))]
    parts = [f"{label} {_ms(v)}" for label, v in named if v is not None and pd.notna(v)]
    return ", ".join(parts) or None


def _mfu(pct, tflops, clock=None, power=None) -> str | None:
    if pct is None or pd.isna(pct):
        return None
    at = f" of {sig3(tflops)} TFLOP/s" if tflops is not None and pd.notna(tflops) else ""
    how = [f"{float(v):.0f} {unit}" for v, unit in ((clock, "MHz"), (power, "W limit")) if v is not None and pd.notna(v)]
    return pct_cell(pct) + at + (f" ({', '.join(how)})" if how else "")


def instep_context(instep: pd.DataFrame | None, split: pd.DataFrame | None) -> dict | None:
    """The "Inside the step" part of the training section: per inspected job, what was recorded (and
    what not), its bucket sentences and its headline; the four-part split as one table. None when
    the run did not inspect (no split table)."""
    if split is None or split.empty:
        return None
    buckets = instep if instep is not None else pd.DataFrame(columns=["job", "sentence"])
    jobs, rows = [], []
    for r in split.to_dict("records"):
        source = str(r.get("source") or "none")
        sentences = [str(s) for s in buckets.loc[buckets["job"] == r["job"], "sentence"] if isinstance(s, str)]
        jobs.append({"job": r["job"], "recorded": SOURCES.get(source, source), "not_recorded": _not_recorded(r),
                     "sentences": sentences, "headline": str(r.get("headline") or "")})
        adds = {True: "yes", False: "no"}.get(r.get("adds_up")) if isinstance(r.get("adds_up"), bool) else None
        rows.append([r["job"], _ms(r["step_ms"]), _ms(r["compute_ms"]), _ms(r["compute_slowdown_ms"]),
                     _ms(r["exposed_comm_ms"]), _ms(r["rest_ms"]), _rest(r), adds,
                     {True: "ok", False: "fails"}.get(r.get("bounds_ok")) if isinstance(r.get("bounds_ok"), bool) else None,
                     _mfu(r.get("mfu_spec"), r.get("spec_peak_tflops")),
                     _mfu(r.get("mfu_achievable"), r.get("achievable_tflops"), r.get("achievable_sm_clock_mhz"),
                          r.get("achievable_power_limit_w"))])
    headers = ["job", "step", "compute", "compute slowdown", "exposed comm", "rest", "the rest, named", "adds up",
               "bounds", "MFU (spec)", "MFU (achievable)"]
    return {"jobs": jobs, "split_table": table(headers, rows),
            "note": ("training.inspect: each multi-rank job's collectives inside its timed steps, beside the same "
                     "collective alone (the comm family's median at that size and dtype, as device time like the "
                     "in-step kernel time: graph timing, else events timing where it is not host-bound; a host-bound "
                     "standalone figure is named not comparable), and its step in four parts "
                     "from traces of extra real and compute-only steps: compute (the timed compute-only step), "
                     "compute slowed down while communicating (the same kernels, slower beside NCCL), exposed "
                     "communication (NCCL with no compute kernel beside it) and the rest, named. It adds up when "
                     "the unexplained rest is within the phases' noise. Where the profiler slowed the traced steps "
                     "(a host-bound step), its added time comes off the host gaps, at most all of them: the GPU "
                     "idled while the profiler ran on the host.")}


def split_row(split: pd.DataFrame | None, row) -> dict | None:
    """The training_split.csv row of a summary row's job, or None."""
    if split is None or split.empty or "job" not in split:
        return None
    found = split[split["job"] == job_key(row)]
    return found.iloc[0].to_dict() if len(found) else None


def verdict_clause(split: pd.DataFrame | None, instep: pd.DataFrame | None, row) -> tuple[str, str]:
    """(a clause for the training headline naming the step's largest cost beyond compute, a sentence for
    its reason) from the job's split; ('', '') where the run did not inspect it or the traces split
    nothing (a CPU run)."""
    r = split_row(split, row)
    key = str(r.get("largest_cost") or "") if r else ""
    if not r or key not in PARTS or pd.isna(r.get(key)) or not r.get("step_ms"):
        return "", ""
    others = [f"{PARTS[k]} {_ms(r[k])}" for k in PARTS if k != key and pd.notna(r.get(k))]
    clause = (f", {_ms(r['step_ms'])} step; its largest cost beyond compute: {PARTS[key]} ({_ms(r[key])}, "
              f"{r[key] / r['step_ms']:.0%} of the step)" + (f", then {', '.join(others)}" if others else ""))
    reason = ("the traces split the step: the phases' difference (step - compute-only) counts compute slowed down "
              "while communicating as communication")
    if instep is not None and not instep.empty and "ratio" in instep:
        ratios = instep.loc[instep["job"] == r["job"], "ratio"].dropna()
        if len(ratios) and ratios.min() < FAR_BELOW_RATIO:
            reason += ("; inside the step the collectives ran far below their standalone speed: the link is fine, "
                       "the overlap with compute is what costs")
    return clause, reason
