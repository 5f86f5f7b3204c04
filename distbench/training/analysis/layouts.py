"""Which parallel layout, the parts the rest of the training analysis reads: the layouts'
names as the report writes them, and why one layout is slower than another: each layout's step as
compute and exposed communication per step, from the best record the run has, for the layouts' Verdict
row (layout_verdict.layout_verdict) to name the cost that sets a slower layout apart, and whether two
layouts differ at all beyond their steps' spread.

Sources of a layout's cost, best first (`source`):
- `traces`: training.inspect's split (training_split.csv, instep_summary): exposed communication read
  off the real step's GPU timeline (NCCL running with no compute kernel beside it). The only record
  for fsdp_tp, whose tensor-parallel all-reduces sit inside forward and backward (no compute-only
  step: its compute then includes the slowdown by communication);
- `phases`: the timed phases (training_summary.csv): compute = the compute-only step, exposed
  communication = step − compute-only, capped at the collectives alone (summary.step_split).
A layout with neither has no cost entry, and the Verdict says how to get one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from distbench.core.layout_spec import SPECS, layout_title
from distbench.training.analysis.instep_view import job_key
from distbench.training.analysis.summary import _num

FAILED_AS = {"oom": "out of memory", "timeout": "timed out", "not_run": "not run", "wrong": "wrong results",
             "compile_failed": "compile failed"}


def layout_name(r) -> str:
    """'DDP', 'FSDP2 full shard', 'HSDP (shard 2)', '2D (TP 2)': the layout's title, with its group size
    (the column its spec names) where the row has one."""
    spec = SPECS.get(str(r.get("strategy") or ""))
    return layout_title(r.get("strategy"), _num(r.get(spec.group)) if spec is not None and spec.group else None)


@dataclass(frozen=True)
class LayoutCost:
    step_ms: float
    compute_ms: float
    exposed_comm_ms: float
    source: str  # traces | phases
    host_gaps_ms: float = math.nan  # of the rest: the GPU idle, waiting for the host (traces only)

    @property
    def rest_ms(self) -> float:
        """The step beyond compute and exposed communication (traces: compute includes its slowdown
        only where no compute-only step exists; otherwise the slowdown is part of the rest here)."""
        return self.step_ms - self.compute_ms - self.exposed_comm_ms


def layout_costs(rows: pd.DataFrame, split: pd.DataFrame | None) -> dict[str, LayoutCost]:
    """strategy -> its LayoutCost, for one model's layout rows (layout_verdict.layout_rows)."""
    by_job = {}
    if split is not None and not split.empty and "job" in split:
        by_job = {str(s["job"]): s for _, s in split.iterrows()}
    out = {}
    for _, r in rows.iterrows():
        step = _num(r.get("step_time_ms_median"))
        s = by_job.get(job_key(r))
        if s is not None and not math.isnan(_num(s.get("exposed_comm_ms"))) and not math.isnan(_num(s.get("compute_ms"))):
            out[str(r["strategy"])] = LayoutCost(step, _num(s["compute_ms"]), _num(s["exposed_comm_ms"]), "traces",
                                                 _num(s.get("rest_host_gaps_ms")))
            continue
        compute, exposed = _num(r.get("compute_only_ms_median")), _num(r.get("exposed_comm_capped_ms"))
        if not (math.isnan(compute) or math.isnan(exposed)):
            out[str(r["strategy"])] = LayoutCost(step, compute, exposed, "phases")
    return out


def level_with(slower, faster) -> bool:
    """Whether two layouts' rows (training_summary.csv) are level: the slower one's 5th-percentile step
    time is within the faster one's 95th, so this run does not tell them apart (on 2x H200 HSDP with
    shard 2, which shards as FSDP2 does, came 10-11% apart by median either way round in two runs:
    benchmarks/results/layouts-inspected-h200x2-2026-11-28). False where either spread is missing."""
    p5, p95 = _num(slower.get("step_time_ms_p5")), _num(faster.get("step_time_ms_p95"))
    return not (math.isnan(p5) or math.isnan(p95)) and p5 <= p95


def slower_because(slow: LayoutCost | None, best: LayoutCost | None, best_name: str) -> str:
    """Of compute, exposed communication and the rest of the step, the part in which `slow` spends the most
    beyond the fastest layout's, in words: ': 34.0 ms of communication exposed per step, against 19.7 ms
    under FSDP2 full shard', or ': 159.3 ms per step beyond compute and exposed communication (151.1 ms of
    it the GPU idle, waiting for the host), against 5.3 ms under ...'; '' without a cost record."""
    if slow is None:
        return ""
    if best is None:
        return f": {slow.exposed_comm_ms:,.1f} ms of communication exposed per step"
    diffs = {"comm": slow.exposed_comm_ms - best.exposed_comm_ms, "compute": slow.compute_ms - best.compute_ms,
             "rest": slow.rest_ms - best.rest_ms}
    part = max(diffs, key=lambda k: diffs[k] if diffs[k] == diffs[k] else -math.inf)

    def against(ms: float) -> str:
        # the split of a step whose parts overlap leaves a small negative rest: none, not "-2.5 ms"
        return (f", against {ms:,.1f} ms under {best_name}" if ms >= 0 else
                f", against none under {best_name} (its split gives {ms:,.1f} ms)")
    if part == "comm":
        return f": {slow.exposed_comm_ms:,.1f} ms of communication exposed per step" + against(best.exposed_comm_ms)
    if part == "compute":
        return f": {slow.compute_ms:,.1f} ms of compute per step" + against(best.compute_ms)
    gaps = (f" ({slow.host_gaps_ms:,.1f} ms of it the GPU idle, waiting for the host)"
            if slow.host_gaps_ms == slow.host_gaps_ms and slow.host_gaps_ms > 0 else "")
    return f": {slow.rest_ms:,.1f} ms per step beyond compute and exposed communication{gaps}" + against(best.rest_ms)
