"""The traces' report section (config profile): per profiled job, where its traces are, the overlap
and the temporal breakdown (idle / compute / non-compute GPU time) they show (distbench.traces.overlap),
beside the training family's step-time overlap for the same job, and the profiled steps' time against
the job's unprofiled step time, with a warning where the profiler slowed the job by more than
SLOWDOWN_WARN (then the trace describes another run than the one measured). Fragments:
templates/traces.*.j2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.section import ReportInputs, Section, pct_cell, table
from distbench.core.units import sig3

TEMPLATES = Path(__file__).parent / "templates"

# profiled / unprofiled step time above which the trace is said to describe a different run: the
# profiler's own cost (recording every op and kernel) beyond this is more than step-to-step noise
# (the threshold, 10%).
SLOWDOWN_WARN = 1.10


def _read_traces(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"job": "string", "trace": "string", "note": "string", "mode": "string"})


BREAKDOWN_PCT = ("idle_pct", "compute_time_pct", "non_compute_time_pct")
BREAKDOWN_RANKS_LISTED = 4  # more ranks than this: the median, and the idlest rank by name


def _breakdown_cell(traced: pd.DataFrame) -> str | None:
    """"idle / compute / non-compute" percentages of the GPU span per rank ("rank 0: a / b / c; rank 1:
    ..."), or, over more than BREAKDOWN_RANKS_LISTED ranks, their medians and the idlest rank's: a
    median alone would hide the one rank that sits idle waiting for the others. A CPU-only trace has
    no device timeline to break down, so it says so rather than show a number."""
    if traced.empty:
        return None
    if (traced["source"] == "cpu_ops").all():
        return "not available on CPU"
    if "idle_pct" not in traced.columns:  # a table written before the breakdown existed
        return None
    ranks = traced.dropna(subset=list(BREAKDOWN_PCT)).sort_values("rank")
    if ranks.empty:
        return None

    def split(r) -> str:
        return " / ".join(pct_cell(r[c] / 100) for c in BREAKDOWN_PCT)

    if len(ranks) == 1:
        return split(ranks.iloc[0])
    if len(ranks) <= BREAKDOWN_RANKS_LISTED:
        return "; ".join(f"rank {int(r['rank'])}: {split(r)}" for _, r in ranks.iterrows())
    idlest = ranks.loc[ranks["idle_pct"].idxmax()]
    return f"median {split(ranks[list(BREAKDOWN_PCT)].median())}; idlest, rank {int(idlest['rank'])}: {split(idlest)}"


def _job_key(r) -> str:
    """A training summary row's job, as traces.overlap names it (its directory under training/)."""
    return f"{r['backend']}/{r['model']}/ws{int(r['world_size'])}/{r['config']}"


def profiled_step_ms(traced: pd.DataFrame) -> float | None:
    """The profiled step time of one job (ms): the slowest rank's median, since the training table's
    step time is the slowest rank's too (each step's max over ranks); None without step spans."""
    if "profiled_step_ms" not in traced.columns:  # a table written before the steps were read
        return None
    per_rank = pd.to_numeric(traced["profiled_step_ms"], errors="coerce").dropna()
    return float(per_rank.max()) if len(per_rank) else None


def slowdown_warning(job: str, profiled_ms: float, unprofiled_ms: float) -> str | None:
    """What the report says when the profiled steps ran more than SLOWDOWN_WARN times slower than
    the job's measured (unprofiled) steps, else None."""
    if not (unprofiled_ms > 0) or not (profiled_ms / unprofiled_ms > SLOWDOWN_WARN):
        return None
    return (f"{job}: the profiler slowed the job by {100 * (profiled_ms / unprofiled_ms - 1):.0f}% (profiled step "
            f"{profiled_ms:.3g} ms against {unprofiled_ms:.3g} ms unprofiled), so its trace describes a different "
            "run than the measured one: read its overlap and breakdown with care.")


def build(inputs: ReportInputs) -> dict | None:
    """Traces on request (config profile): per profiled job, where its traces are and the overlap
    they show (HTA's definition, distbench.traces.overlap), beside the training family's own
    step-time overlap for the same job."""
    t = inputs.table("trace_overlap", _read_traces)
    if t is None or t.empty:
        return None
    step_overlap, step_ms = {}, {}
    s = inputs.table("training_summary")
    if s is not None and {"model", "config"} <= set(s.columns):
        step_overlap = {_job_key(r): r["overlap_fraction"] for _, r in s.iterrows()}
        if "step_time_ms_median" in s.columns:
            step_ms = {_job_key(r): r["step_time_ms_median"] for _, r in s.iterrows()}
    headers = ["family", "job", "mode", "ranks traced", "overlap in the trace (median over ranks)",
               "overlap by step times", "GPU time: idle / compute / non-compute (per rank)",
               "profiled step ms", "unprofiled step ms", "profiler slowdown %", "traces"]
    rows, warnings = [], []
    for (family, job), g in t.groupby(["family", "job"], sort=True):
        traced = g[g["trace"].fillna("") != ""]
        ov = traced["overlap_fraction"].dropna()
        files = [f"../{p}" for p in traced["trace"]]
        # only a training job has an unprofiled step time to compare with (a comm job's profiled
        # "steps" are single ops at one size)
        profiled = profiled_step_ms(traced) if family == "training" else None
        unprofiled = step_ms.get(job) if family == "training" else None
        unprofiled = None if unprofiled is None or pd.isna(unprofiled) else float(unprofiled)
        slowdown = warning = None
        if profiled is not None and unprofiled:
            slowdown = f"{100 * (profiled / unprofiled - 1):+.1f}"
            warning = slowdown_warning(job, profiled, unprofiled)
            if warning:
                warnings.append(warning)
                slowdown += " (profiler slowed the job; the trace describes a different run)"
        rows.append([family, job, g["mode"].iloc[0], len(traced), pct_cell(ov.median()) if len(ov) else None,
                     pct_cell(step_overlap.get(job)) if family == "training" and job in step_overlap else None,
                     _breakdown_cell(traced), None if profiled is None else sig3(profiled),
                     None if unprofiled is None else sig3(unprofiled), slowdown,
                     " ".join(files) if files else (g["note"].iloc[0] or None)])
    return {"table": table(headers, rows), "warnings": warnings,
            "note": ("Each trace is a short extra pass after the job's timed passes (never inside them); open it at "
                     "ui.perfetto.dev. Overlap in the trace = time computing while communicating / time communicating "
                     "(Holistic Trace Analysis' definition; GPU: NCCL kernels, ncclDevKernel_* and older names, "
                     "against the other kernels; CPU: Gloo's gloo:* collectives against aten:: ops). Overlap by step "
                     "times = 1 - exposed communication / the gradient all-reduce alone (the training table). GPU time "
                     "(Holistic Trace Analysis' temporal breakdown) splits the span from the first GPU kernel, copy or "
                     "set to the last into idle (none running), compute (a computation kernel running) and "
                     "non-compute (only NCCL or memory kernels running); a CPU trace has no such timeline. Profiled step = "
                     "the slowest rank's median wall time of the traced training steps, each from the end of the one "
                     "before to the end of its last GPU kernel (its CPU span on CPU), against the job's unprofiled "
                     "median step time (the training table); a slowdown above 10% is flagged.")}


TRACES = Section("traces", "Traces", TEMPLATES, build)
