"""The report's sections before and between the families': the Verdict and the Findings (both
gathered from every section by distbench.report.render), regressions against a baseline, the plan,
several runs side by side, and the figures no section claims. Fragments: templates/sections/."""

from __future__ import annotations

from pathlib import Path

from distbench.core.choices import backend_name
from distbench.core.section import ReportInputs, Section, table
from distbench.report.regressions import DEFAULT_THRESHOLD_PCT, compare, human_value
from distbench.report.runs import several_runs

TEMPLATES = Path(__file__).parent / "templates" / "sections"


def _gathered(_inputs: ReportInputs) -> dict:
    """The Verdict's and the Findings' content comes from every section: `gathered` in the context
    (render.build_context)."""
    return {}


def _plan(plan: dict) -> dict:
    """What ran, and what the plan skipped (the fragment adds the sections' skips: points of a sweep)."""
    ws = plan.get("world_sizes") or {}
    ran = [f"{backend_name(b)} ({b}): world sizes {', '.join(map(str, ws.get(b, [])))}"
           for b in plan.get("backends_run") or []]
    skipped = [f"{s.get('what')}: skipped — {s.get('why')}" for s in plan.get("skipped") or []]
    gpus = f"{plan.get('gpus')} ({plan.get('gpus_source')})" if "gpus" in plan else None
    return {"ran": ran, "skipped": skipped, "gpus": gpus, "oversubscribed": list(plan.get("oversubscribed") or [])}


def _regressions(inputs: ReportInputs) -> dict | None:
    """Against report.baseline: the figures that moved beyond their noise and the threshold (the
    measures every registered section declares)."""
    opts = (inputs.config or {}).get("report") or {}
    measures = [m for s in inputs.sections for m in s.regressions]
    if not opts.get("baseline") or not measures:
        return None
    threshold = float(opts.get("regression_threshold_pct") or DEFAULT_THRESHOLD_PCT)
    # a baseline file that cannot be read is named here, with its fix; what the others hold is compared
    unreadable = []
    # this run's tables through the report's one cached read of each (ReportInputs.table)
    compared = compare({m.table: inputs.table(m.name) for m in measures}, opts["baseline"], measures, threshold,
                       unreadable=unreadable)
    # a boolean mask, also for an empty comparison (an empty object column would select columns instead)
    flagged = compared[compared["flagged"].astype(bool)]
    rows = [[r["family"], r["what"], human_value(r["baseline"], r["unit"]), human_value(r["now"], r["unit"]),
             f"{r['change_pct']:+.1f}%", r["direction"], r["why"]]
            for _, r in flagged.sort_values("change_pct", key=abs, ascending=False).iterrows()]
    no_spread = ", ".join(dict.fromkeys(m.family for m in measures if not m.low))
    return {"baseline": str(opts["baseline"]),
            "unreadable": [{"path": e.path, "problem": e.problem, "fix": e.fix} for e in unreadable],
            "note": (f"{len(compared)} figure(s) present in both runs compared; {len(flagged)} moved by more than "
                     f"{threshold:g}% and beyond their p5-p95 noise"
                     + (f" ({no_spread}: the threshold alone)." if no_spread else ".")),
            "table": table(["family", "what", "baseline", "now", "change", "direction", "why"], rows)}


VERDICT = Section("verdict", "Verdict", TEMPLATES, _gathered)
REGRESSIONS = Section("regressions", "Regressions against the baseline", TEMPLATES, _regressions)
FINDINGS = Section("findings", "Findings", TEMPLATES, _gathered)
PLAN = Section("plan", "Plan", TEMPLATES, lambda inputs: _plan(inputs.plan or {}))
SEVERAL_RUNS = Section("several_runs", "Several runs side by side", TEMPLATES, several_runs)
# the figures of directories no section names (the fragment decides: shown when there are none at all)
OTHER_FIGURES = Section("other_figures", "Figures", TEMPLATES, _gathered)
